"""Models given as a path, bytes or an onnx.ModelProto, as the path kiln reads."""

import contextlib
import os
import tempfile

from ._args import integer
from ._kiln import KilnError


def _serialize(model):
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto, without importing onnx
        return model.SerializeToString()
    raise TypeError(
        f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


@contextlib.contextmanager
def model_paths(models):
    """Yields one file path per model. In-memory models go to temporary files
    (kiln's frontend reads files); kiln's messages then name them
    "<model N bytes>" instead of the temporary path."""
    paths, temps = [], []
    try:
        for i, m in enumerate(models):
            if isinstance(m, (str, os.PathLike)):
                paths.append(os.fspath(m))
                continue
            data = _serialize(m)
            fd, tmp = tempfile.mkstemp(prefix="kiln-pymodel-", suffix=".onnx")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            temps.append((tmp, f"<model {i} bytes>" if len(models) > 1 else "<model bytes>"))
            paths.append(tmp)
        try:
            yield paths
        except KilnError as e:
            msg = str(e)
            for tmp, name in temps:
                msg = msg.replace(tmp, name)
            if msg == str(e):
                raise
            raise type(e)(msg) from None
    finally:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def input_shapes_text(shapes):
    """{"input": (1, 3, 224, 224)} or kiln's own "input:[1,3,224,224]" text."""
    if shapes is None:
        return ""
    if isinstance(shapes, str):
        return shapes
    if not isinstance(shapes, dict):
        raise TypeError("input_shapes must be a dict {name: shape} or a string like "
                        f"'input:[1,3,224,224]', not {type(shapes).__name__}")
    parts = []
    for name, dims in shapes.items():
        if not isinstance(name, str):
            raise TypeError(f"input_shapes: an input is named by a string, not {type(name).__name__}")
        if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__"):
            raise TypeError(f"input_shapes['{name}'] must be a sequence of dimensions, "
                            f"not {type(dims).__name__}")
        parts.append(f"{name}:[{','.join(str(integer(f'input_shapes[{name!r}]', d, -2**63, 2**63 - 1)) for d in dims)}]")
    return ",".join(parts)
