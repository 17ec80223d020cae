"""Models given as a path, bytes or an onnx.ModelProto, as the path kiln reads."""

import contextlib
import os
import tempfile

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
    return ",".join(f"{name}:[{','.join(str(int(d)) for d in dims)}]"
                    for name, dims in shapes.items())
