"""kiln.runtime: load a package and run it, like `kiln run` (runtime::GraphExecutor)."""

import dataclasses
import os
from typing import List, NamedTuple, Tuple, Union

import numpy as np

from . import _kiln
from ._args import flag, integer


class TensorInfo(NamedTuple):
    name: str
    shape: Tuple[int, ...]
    dtype: str  # numpy's name: "float32", "int64", ...; "bfloat16" (held as uint16 bits)
    # "sequence" for a sequence of tensors of `dtype` (given and returned as a
    # list of arrays); `optional` values may be None.
    kind: str = "tensor"
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
    """`kiln run --print-time`'s statistics, in milliseconds per run."""
    mean_ms: float
    median_ms: float
    max_ms: float
    min_ms: float
    std_ms: float
    times_ms: List[float]

    def __str__(self):
        return (f"Execution time summary ({len(self.times_ms)} runs):\n"
                f" mean (ms)   median (ms)  max (ms)     min (ms)     std (ms)\n"
                f" {self.mean_ms:<11.4f} {self.median_ms:<12.4f} {self.max_ms:<12.4f} "
                f"{self.min_ms:<12.4f} {self.std_ms:<12.4f}")


class GraphModule:
    """A loaded package. Inputs are numpy arrays (or anything np.asarray
    takes) of exactly the input's dtype and shape; C-contiguous arrays are
    copied once, straight into kiln's storage, other layouts are made
    contiguous first; input_view() gives that storage to fill without a copy.
    numpy has no bfloat16: a bfloat16 input takes a uint16 array of the values'
    bits (the upper half of each float32, `(x.view(np.uint32) >> 16)` rounded
    or not as the caller wants), and a bfloat16 output comes back as uint16
    bits (`(y.astype(np.uint32) << 16).view(np.float32)` gives the values).
    The GIL is released while kernels run; one module may
    be shared by threads (each call is serialized; run(name=array) sets, runs
    and copies the outputs as one call), or each thread loads its own.
    """

    def __init__(self, path):
        self._m = _kiln.GraphModule(os.fspath(path))
        self._inputs = [TensorInfo(*i) for i in self._m.input_info()]
        self._outputs = [TensorInfo(*o) for o in self._m.output_info()]

    def input_info(self) -> List[TensorInfo]:
        return list(self._inputs)

    def output_info(self) -> List[TensorInfo]:
        return list(self._outputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def _index(self, key: Union[str, int]) -> int:
        if isinstance(key, str):
            return self._m.input_index(key)  # a wrong name: kiln's message, listing the inputs
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"an input is named by its name or index, not {type(key).__name__}")
        if 0 <= key < len(self._inputs):
            return int(key)
        raise IndexError(f"input index {key} is out of range ({len(self._inputs)} inputs)")

    def _array(self, i: int, value):
        if not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=self._inputs[i].dtype)
        if not value.dtype.isnative:
            value = value.astype(value.dtype.newbyteorder("="))
        return np.require(value, requirements="C")

    def _set_host_input(self, i: int, value) -> None:
        """A sequence input (a list of arrays) or an optional one (None: empty)."""
        info = self._inputs[i]
        if value is None:
            self._m.set_input_none(i)  # kiln's message when the input is not optional
        elif info.kind == "sequence":
            if isinstance(value, np.ndarray) or not hasattr(value, "__iter__"):
                raise _kiln.InvalidInputError(
                    f"input '{info.name}' is a sequence of {info.dtype} tensors: give a list "
                    f"of arrays, not {type(value).__name__}")
            self._m.set_input_sequence(i, [self._array(i, e) for e in value])
        else:
            self._m.set_input(i, self._array(i, value))

    def _is_host_input(self, i: int) -> bool:
        return self._inputs[i].kind == "sequence" or self._inputs[i].optional

    def _prepared(self, key: Union[str, int], value):
        """(index, a native, C-contiguous array) for input `key`."""
        i = self._index(key)
        if value is None:
            raise _kiln.InvalidInputError(f"input '{self._inputs[i].name}' is None, not an array "
                            f"({self._inputs[i].dtype} {list(self._inputs[i].shape)})")
        if not isinstance(value, np.ndarray):
            # bfloat16: numpy has no such dtype; the bits must come as uint16 (checked by kiln).
            want = self._inputs[i].dtype
            value = np.asarray(value) if want == "bfloat16" else np.asarray(value, dtype=want)
        if not value.dtype.isnative:
            value = value.astype(value.dtype.newbyteorder("="))
        # np.require copies only a layout that is not C-contiguous (and keeps 0-d arrays 0-d).
        return i, np.require(value, requirements="C")

    def set_input(self, key: Union[str, int], value) -> None:
        """Sets the input named `key` (or number `key`); a wrong name, shape
        or dtype raises InvalidInputError listing the model's inputs. A
        sequence input takes a list of arrays; an optional one also None."""
        i = self._index(key)
        if self._is_host_input(i):
            self._set_host_input(i, value)
            return
        self._m.set_input(*self._prepared(key, value))

    def input_view(self, key: Union[str, int]) -> np.ndarray:
        """Input `key`'s own storage in kiln as a writable array: fill it in
        place (np.copyto(view, x), view[...] = ..., a decoder writing into it)
        to pass the input without any copy. Valid as long as the array
        exists (it keeps the module alive); it keeps its contents across runs."""
        return self._m.input_view(self._index(key))

    def run(self, **inputs):
        """run(): runs the model on the inputs set, returning None (read
        outputs with get_output). run(name=array, ...): sets those inputs,
        runs, and returns every output as a list of numpy arrays (copies),
        as one serialized call: threads sharing the module each get the
        outputs of their own inputs. The stateful sequence set_input, run(),
        get_output makes each call atomic but not the sequence: threads that
        share a module that way must serialize it themselves."""
        if not inputs:
            self._m.run()
            return None
        # Sequence and optional inputs are set first (outside the one
        # serialized call); sequence outputs come back as lists of arrays,
        # empty optionals as None.
        tensors = []
        for name, value in inputs.items():
            i = self._index(name)
            if self._is_host_input(i):
                self._set_host_input(i, value)
            else:
                tensors.append(self._prepared(name, value))
        return self._m.run_with(tensors)

    def get_output(self, index: int, copy: bool = True) -> np.ndarray:
        """Output `index` of the last run. copy=False returns a read-only view
        of kiln's storage, without a copy, valid until the next run. An index
        out of range is an IndexError naming the valid ones."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"an output is named by its index, not {type(index).__name__}")
        n = len(self._outputs)
        if not 0 <= index < n:  # here too: an index past int64 never reaches pybind11
            raise IndexError(f"output index {index} is out of range ({n} output"
                             f"{'' if n == 1 else 's'}" + (f": valid 0 to {n - 1})" if n else ")"))
        return self._m.get_output(int(index), flag("copy", copy))

    def benchmark(self, repeat: int = 10, warmup: int = 1) -> BenchmarkResult:
        """Times `repeat` runs after `warmup` untimed ones, on the inputs set
        (`kiln run --repeat N --print-time`)."""
        return BenchmarkResult(**self._m.benchmark(integer("repeat", repeat),
                                                   integer("warmup", warmup, lo=0)))

    def profile(self) -> List[dict]:
        """Per-kernel times of one run, in kernel order (`kiln run --profile`)."""
        return self._m.profile()

    @property
    def target(self) -> str:
        return self._m.target

    @property
    def num_kernels(self) -> int:
        return self._m.num_kernels

    def __repr__(self):
        ins = ", ".join(f"{t.name} {t.dtype} {list(t.shape)}" for t in self._inputs)
        return f"<kiln.runtime.GraphModule {self._m.package_path!r}: inputs {ins}>"


def load(path) -> GraphModule:
    """Loads a package (tar or self-contained .so); refuses, with
    CorruptPackageError or IncompatiblePackageError naming the problem, a
    damaged package or one this CPU cannot run."""
    return GraphModule(path)


def num_threads() -> int:
    """Threads kernels run on: KILN_NUM_THREADS, else the cores."""
    return _kiln.get_num_threads()


def set_num_threads(n: int) -> None:
    """Sets the kernels' thread count (n <= 0: back to the default). Tuning
    records are keyed by it: build with the count you will run with."""
    _kiln.set_num_threads(integer("n", n))

