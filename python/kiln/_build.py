"""kiln.build: `kiln build` from Python (the same driver and record choice)."""

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

from . import _kiln
from ._args import flag, text
from ._model import input_shapes_text, model_paths


@dataclasses.dataclass(frozen=True)
class WorkloadReport:
    """One template workload of a build and where its config came from."""
    key: str
    count: int          # kernels using it
    configured: bool    # False: the template's fallback config
    origin: str         # "database", "shipped log", "borrowed", "config" or "fallback"
    source: str         # the database or log file ("" for config/fallback)
    borrowed_from: str  # origin "borrowed": the workload whose record it is
    gflops: float       # as measured for the record's own workload (0 if none)


@dataclasses.dataclass(frozen=True)
class BuildReport:
    """What `kiln build` prints, as data; str() prints it the CLI's way."""
    model: str
    target: str
    seconds: float
    kernels: int
    templated_kernels: int
    generic_kernels: int
    workloads: List[WorkloadReport]
    tuned: int                          # workloads with a record of their own
    total: int                          # template workloads
    by_source: Dict[str, int]           # record source -> workloads
    borrowed: List[Tuple[str, str, str]]  # (workload, donor workload, source)
    # Of `tuned`, workloads kept on their untuned config: no tuned config ran
    # clearly faster in kiln tune's in-graph step.
    kept_untuned: int
    demotions: List[dict]               # kernels the compile budget made serial
    notes: List[str]

    @property
    def fallbacks(self) -> List[WorkloadReport]:
        """The workloads left on their template's fallback config."""
        return [w for w in self.workloads if not w.configured]

    @property
    def configured(self) -> int:
        return sum(1 for w in self.workloads if w.configured)

    def __str__(self):
        lines = [f"kiln build: {self.model} ({self.kernels} kernels: {self.templated_kernels} "
                 f"templated, {self.generic_kernels} generic; {self.seconds:.1f} s)"]
        sources = ", ".join(f"{n} from {s}" for s, n in sorted(self.by_source.items()))
        lines.append(f"tuned: {self.tuned} of {self.total} workloads"
                     + (f" ({sources})" if sources else ""))
        if self.kept_untuned:
            lines.append(f"in-graph: {self.kept_untuned} workload(s) keep the untuned config: no "
                         "tuned config ran clearly faster inside the model (kiln tune's in-graph "
                         "step)")
        if self.borrowed:
            lines.append(f"borrowed: {len(self.borrowed)} workload(s) use the config tuned for "
                         "a nearby shape or another ISA class:")
            for key, donor, source in self.borrowed:
                lines += [f"  {key}", f"    <- {donor} ({source})"]
        line = f"configs: {self.configured} of {len(self.workloads)} workloads configured"
        if self.fallbacks:
            lines.append(line + "; fallback configs for:")
            lines += [f"  {w.key} (x{w.count})" for w in self.fallbacks]
        else:
            lines.append(line)
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


class Package:
    """A built model, held in memory until export() writes it."""

    def __init__(self, native, report: BuildReport):
        self._native = native
        self.report = report

    @property
    def target(self) -> str:
        return self._native.target

    @property
    def format(self) -> str:
        return self._native.format

    @property
    def graph_json(self) -> dict:
        """The package's mod.json (docs/package-format.md)."""
        return json.loads(self._native.graph_json)

    def export(self, path, format: Optional[str] = None) -> str:
        """Writes the package (a tar of mod.so, mod.json, mod.params, or with
        format="so" one self-contained library) atomically: a failure leaves no
        file. Returns the path."""
        path = os.fspath(path)
        self._native.export(path, text("format", format))
        return path

    def load(self):
        """The package as a kiln.runtime.GraphModule (exported to a temporary
        file, removed once loaded)."""
        from . import runtime
        tmp = tempfile.mkdtemp(prefix="kiln-pypkg-")
        try:
            return runtime.load(self.export(os.path.join(tmp, "model." + self.format)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def __repr__(self):
        return (f"<kiln.Package {self.format}: tuned {self.report.tuned} "
                f"of {self.report.total} workloads>")


def build(model, input_shapes=None, target=None, tuning_log=None, require_tuned=False,
          output_format="tar", *, shipped_logs=True, borrow=True, configs=None,
          precision="fp32", calibration=None, calibrate=None, keep_float=None,
          reduce_range=False) -> Package:
    """Compiles an ONNX model like `kiln build`.

    model: a path, bytes or an onnx.ModelProto. input_shapes: binds dynamic
    axes, {"input": (1, 3, 224, 224)} or "input:[1,3,224,224]". target: an
    LLVM target string ("llvm -mcpu=..."; default this machine). tuning_log:
    kiln tune's database; configs come from it, else the shipped logs for the
    CPU's ISA class (shipped_logs=False: not), else a nearby shape's record
    (borrow=False: not), else the template's fallback. require_tuned: raise
    KilnError, naming them, when workloads have no record of their own.
    configs: {workload key: config dict or JSON} applied first (kiln build
    --config). output_format: "tar" or "so", export()'s default.

    precision: "fp32" (the default), "int8" or "bf16", as kiln build
    --precision. "int8" quantizes the float model with kiln quantize's code
    and builds the QDQ model it writes: calibration (needed) is DATA.npz
    (one array per input, samples stacked on a new leading axis) or a folder
    of .npz files, one sample each; calibrate is "max" (the default),
    "percentile" or "kl"; keep_float lists node names left in float32;
    reduce_range=True quantizes weights to 7 bits, [-64, 64], which x86
    targets without VNNI multiply with vpmaddubsw (the CLI's --calibration,
    --calibrate, --keep-float, --reduce-range). "bf16" needs a target
    with avx512bf16. The report's notes say how many nodes were quantized.
    """
    if precision not in ("fp32", "int8", "bf16"):
        raise _kiln.InvalidInputError(
            f"unknown precision {precision!r} (valid: fp32, int8, bf16)")
    if precision == "int8" and calibration is None:
        raise _kiln.InvalidInputError(
            'precision="int8" needs calibration= (DATA.npz or a folder of .npz)')
    if precision != "int8" and (calibration is not None or calibrate is not None
                                or keep_float is not None or reduce_range):
        raise _kiln.InvalidInputError(
            'calibration=, calibrate=, keep_float= and reduce_range= need precision="int8"')
    if configs is not None and not isinstance(configs, dict):
        raise TypeError("configs must be a dict {workload key: config dict or JSON}, "
                        f"not {type(configs).__name__}")
    if isinstance(keep_float, str):
        keep_float = [keep_float]
    quant = _kiln.PrecisionArgs()
    quant.precision = precision
    quant.calibration = os.fspath(calibration) if calibration is not None else ""
    quant.calibrate = calibrate or "max"
    quant.keep_float = list(keep_float or [])
    quant.reduce_range = bool(reduce_range)
    records = _kiln.BuildRecordOptions()
    records.tuning_log = os.fspath(tuning_log) if tuning_log is not None else ""
    records.shipped_logs = bool(shipped_logs)
    records.borrow = bool(borrow)
    records.require_tuned = flag("require_tuned", require_tuned)
    for k in configs or {}:
        if not isinstance(k, str):
            raise TypeError(f"configs: a workload key is a string, not {type(k).__name__}")
    explicit = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (configs or {}).items()}
    with model_paths([model]) as paths:
        native, report = _kiln.build(paths[0], input_shapes_text(input_shapes),
                                     text("target", target), records,
                                     text("output_format", output_format) or "tar", explicit, quant)
    if not isinstance(model, (str, os.PathLike)):
        report["model"] = "<model bytes>"
    report["workloads"] = [WorkloadReport(**w) for w in report["workloads"]]
    report["borrowed"] = [tuple(b) for b in report["borrowed"]]
    return Package(native, BuildReport(**report))
