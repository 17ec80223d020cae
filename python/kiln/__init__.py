"""kiln: compile ONNX models into tuned native packages, from Python.

A thin binding over kiln's C++ library (the same calls the `kiln` command
makes; see README.md, "Python"):

    import kiln
    pkg = kiln.build("model.onnx", tuning_log="tuning.db")   # kiln build
    print(pkg.report)                                         # tuned N of M, fallbacks
    pkg.export("model.tar")
    m = kiln.runtime.load("model.tar")                        # kiln run
    y = m.run(input=x)[0]
    kiln.tune("model.onnx", "tuning.db", trials=64)           # kiln tune
    kiln.tasks("model.onnx", tuning_log="tuning.db")          # kiln tasks
    db = kiln.records.open("tuning.db")                       # kiln records

Errors are kiln.KilnError and its subclasses, carrying kiln's own messages.
"""

import os as _os

from . import _kiln
from . import _paths

# The measurement worker and shipped logs of this build or install, unless
# the caller's environment names others (kiln's own variables; the worker
# processes inherit them).
if _os.path.isfile(_paths.MEASURE_WORKER):
    _os.environ.setdefault("KILN_MEASURE_WORKER", _paths.MEASURE_WORKER)
if _os.path.isdir(_paths.LOGS_DIR):
    _os.environ.setdefault("KILN_LOGS_DIR", _paths.LOGS_DIR)

from ._kiln import (  # noqa: E402
    CorruptPackageError,
    IncompatiblePackageError,
    InvalidInputError,
    KilnError,
    ModelError,
    RecordDBBusyError,
)
from ._build import BuildReport, Package, WorkloadReport, build  # noqa: E402
from ._tune import (  # noqa: E402
    StopTuning,
    Task,
    TuneInterrupted,
    TuneSummary,
    print_progress,
    tasks,
    tune,
)
from . import records, runtime  # noqa: E402

__version__ = _kiln.__version__

__all__ = [
    "build", "Package", "BuildReport", "WorkloadReport",
    "tune", "TuneSummary", "StopTuning", "TuneInterrupted", "print_progress", "tasks", "Task",
    "runtime", "records",
    "KilnError", "ModelError", "InvalidInputError", "CorruptPackageError",
    "IncompatiblePackageError", "RecordDBBusyError",
]
