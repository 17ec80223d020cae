#!/usr/bin/env python3
"""A seeded random-call fuzzer of kiln's Python API (issue 65).

It calls the public surface (kiln.build, Package.export/load, kiln.runtime.load,
GraphModule.run/set_input/get_output/input_view/benchmark/profile,
kiln.runtime.set_num_threads, kiln.records.open and every Database method,
kiln.records.target_key, kiln.tasks, kiln.tune with tiny budgets) with odd
but valid-typed arguments and with invalid ones, and checks that every call
either returns or raises kiln.KilnError (or a subclass), TypeError,
ValueError or IndexError with a clear message: not empty, not pybind11's
"incompatible function arguments" (which names C++ types, not the
argument), never naming the temporary files kiln's Python code makes
(kiln-pymodel-*, kiln-pypkg-*). Anything else is a finding: another exception
type, a signal (the calls run in a worker process, so a crash is caught and
reported with the seed and the call), a hang past --call-timeout.

Call i of seed S draws its arguments from random.Random("S:i") alone, so
one call is reproduced with `--seed S --start i --calls 1` (the worker
rebuilds the same fixtures first: small ONNX models, a built package and
module, a records database, odd files in WORK/). Only files under WORK are
written: no device, FIFO or system path is ever an output.

  PYTHONPATH=build/python python3 fuzz/python_api_fuzz.py --seed 1 --calls 300
  PYTHONPATH=build/python python3 fuzz/python_api_fuzz.py --seconds 600   # a random seed
Exit status: 0 nothing found, 1 findings (listed with seed and call), 2 usage.
"""

import argparse
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# ---- the worker: fixtures and call generators -------------------------------------------------

ODD_STRINGS = ["", " ", "x", ":", "\u00e9\u00e8", "a" * 5000, "../../x", "\\", "%s%n", "\n",
               "{}", "[]", "null", "0", "-1", "nan"]


class Ctx:
    """The fixtures every call may use, made the same way for every seed."""

    def __init__(self, work):
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper

        import kiln
        self.kiln, self.np, self.work = kiln, np, work
        os.makedirs(work, exist_ok=True)
        rng = np.random.default_rng(0)
        w = rng.integers(-3, 4, (8, 4)).astype(np.float32)

        def mm(batch, name):
            g = helper.make_graph(
                [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"]),
                 helper.make_node("Mul", ["x", "two"], ["z"])],
                name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4]),
                 helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 8])],
                [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(2, np.float32), "two")])
            return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

        def int_add():
            g = helper.make_graph(
                [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Div", ["c", "b"], ["d"])],
                "ints", [helper.make_tensor_value_info("a", TensorProto.INT32, [3]),
                         helper.make_tensor_value_info("b", TensorProto.INT32, [3])],
                [helper.make_tensor_value_info("d", TensorProto.INT32, [3])])
            return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

        self.model_proto = mm(2, "static")
        self.models = {}
        for name, proto in (("static", self.model_proto), ("dynamic", mm("N", "dynamic")),
                            ("ints", int_add())):
            path = os.path.join(work, name + ".onnx")
            with open(path, "wb") as f:
                f.write(proto.SerializeToString())
            self.models[name] = path
        self.model_bytes = self.model_proto.SerializeToString()
        self.files = {}

        def file(name, data):
            path = os.path.join(work, name)
            with open(path, "wb") as f:
                f.write(data)
            self.files[name] = path
            return path

        file("garbage.bin", bytes(rng.integers(0, 256, 4096, dtype=np.uint8)))
        file("empty", b"")
        file("truncated.onnx", self.model_bytes[: len(self.model_bytes) // 2])
        file("bad.jsonl", b'{"workload": 1}\nnot json\n')
        file("text.txt", "\u00e9t\u00e9\n".encode())
        os.makedirs(os.path.join(work, "dir"), exist_ok=True)
        self.files["dir"] = os.path.join(work, "dir")
        ro = file("readonly.tar", b"keep")
        os.chmod(ro, 0o444)
        link = os.path.join(work, "link.tar")
        if not os.path.lexists(link):
            os.symlink(os.path.join(work, "linked.tar"), link)
        self.files["link.tar"] = link
        self.package = kiln.build(self.models["static"])
        self.package_path = self.package.export(os.path.join(work, "static.tar"))
        with open(self.package_path, "rb") as f:
            data = f.read()
        file("truncated.tar", data[: len(data) // 3])
        flipped = bytearray(data)
        for i in range(512, len(flipped), 997):
            flipped[i] ^= 0x5A
        file("flipped.tar", bytes(flipped))
        self.module = kiln.runtime.load(self.package_path)
        self.int_module = kiln.build(self.models["ints"]).load()
        self.db_path = os.path.join(work, "tuning.db")
        self.db = kiln.records.open(self.db_path, create=True)
        self.jsonl = os.path.join(work, "records.jsonl")
        self.counter = 0
        with open(self.models["static"], "rb") as f:
            self.static_bytes = f.read()

    def damage(self):
        """What a call must never do to the fixtures: replace the symlink by a file, write
        through the read-only file. (Other outputs may overwrite an existing file the call
        names; the model is put back for the calls after.)"""
        link = self.files["link.tar"]
        if not os.path.islink(link):
            os.unlink(link)
            os.symlink(os.path.join(self.work, "linked.tar"), link)
            return f"the symlink {link} was replaced by a file"
        with open(self.files["readonly.tar"], "rb") as f:
            if f.read() != b"keep":
                os.chmod(self.files["readonly.tar"], 0o644)
                with open(self.files["readonly.tar"], "wb") as g:
                    g.write(b"keep")
                os.chmod(self.files["readonly.tar"], 0o444)
                return "the read-only file was written"
        with open(self.models["static"], "rb") as f:
            if f.read() != self.static_bytes:
                with open(self.models["static"], "wb") as g:
                    g.write(self.static_bytes)
        return None

    def out_path(self, rng):
        """An output path: new, existing, odd, a directory, read-only, a symlink, an input."""
        self.counter += 1
        new = os.path.join(self.work, "out", f"o{self.counter}")
        os.makedirs(os.path.dirname(new), exist_ok=True)
        return rng.choice([
            new + ".tar", new + ".so", new + ".jsonl", new, new + "\u00e9.tar",
            os.path.join(self.work, "no", "such", "dir", "x.tar"), self.files["dir"],
            self.files["dir"] + "/", self.files["readonly.tar"], self.files["link.tar"],
            self.files["garbage.bin"], self.models["static"], self.package_path, self.db_path,
            self.db_path + "-wal", self.db_path + "-shm", "/proc/self/kiln-fuzz", "/proc/version",
            "", ".", new + "\x00x.tar"])

    def in_path(self, rng):
        return rng.choice([
            self.models["static"], self.models["dynamic"], self.package_path, self.db_path,
            self.jsonl, os.path.join(self.work, "missing"), self.files["dir"], "", ".",
            "/proc/self/status", "/dev/null", self.files["garbage.bin"], self.files["empty"],
            self.files["truncated.onnx"], self.files["truncated.tar"], self.files["flipped.tar"],
            self.files["bad.jsonl"], self.files["text.txt"], self.files["link.tar"],
            self.models["static"] + "\x00junk"])


def odd_int(rng):
    return rng.choice([0, 1, 2, -1, 3, 7, 2 ** 31, -2 ** 31 - 1, 2 ** 63, 2 ** 64, 10 ** 30])


def odd_number(rng):
    return rng.choice([0, 0.0, -1, -0.5, 1e-9, 0.01, float("nan"), float("inf"), -float("inf"),
                       1e300, True])


def odd_scalar(rng):
    """A value of the wrong kind where a number or string is wanted."""
    return rng.choice([None, "3", b"3", [1], {}, object(), 1.5, complex(1, 1), (), float("nan")])


def input_shapes(rng, ctx):
    return rng.choice([
        None, "", "x:[2,8]", "x:[1,8]", {"x": (3, 8)}, {"x": [1, 8]}, "x", "x:", "x:[", "x:[]",
        "x:[-1,8]", "x:[0,8]", "x:[1,8", "x:[a,b]", ":[1,2]", "x:[1,8],x:[2,8]", "y:[1,8]",
        "x:[99999999999999999999,8]", "x:[1,8]junk", "x:[1,,8]", "x:[1.5,8]", "x:[1,8,1]",
        "x:[2 , 8]", "\u00e9:[1]", "x:[" + ",".join(["1"] * 40) + "]", {"x": ("a", 8)},
        {"x": None}, {1: (1, 8)}, {"x": (-3, 8)}, {"x": (2 ** 40, 8)}, {"x": (2 ** 70, 8)},
        {"": (1,)}, {"x": ()}, {"x": (1.9, 8)}, 5, ["x", 1], b"x:[1,8]"])


def target(rng):
    return rng.choice([None, "", "llvm", "llvm -mcpu=bogus", "cuda", "x86_64", "llvm -mattr=+nonsense",
                       "llvm -mtriple=aarch64-linux-gnu", "llvm -mtriple=bogus-bogus-bogus",
                       "llvm -mcpu=", "llvm -num-cores=0", "llvm  -mcpu=skylake", "\u00e9", 5])


def model_arg(rng, ctx):
    return rng.choice([
        ctx.models["static"], ctx.models["dynamic"], ctx.models["ints"], ctx.model_bytes,
        bytearray(ctx.model_bytes), ctx.model_proto, ctx.model_bytes[:40], b"", b"\x00" * 64,
        ctx.files["garbage.bin"], ctx.files["truncated.onnx"], ctx.files["empty"],
        os.path.join(ctx.work, "missing.onnx"), ctx.files["dir"], ctx.package_path, "",
        None, 5, 1.5, ["x"], ctx.models["static"] + "\x00"])


def gen_build(rng, ctx):
    kw = {}
    if rng.random() < 0.7:
        kw["input_shapes"] = input_shapes(rng, ctx)
    if rng.random() < 0.3:
        kw["target"] = target(rng)
    if rng.random() < 0.3:
        kw["tuning_log"] = rng.choice([ctx.db_path, ctx.in_path(rng)])
    if rng.random() < 0.2:
        kw["output_format"] = rng.choice(["tar", "so", "zip", "", None, "TAR", 5])
    if rng.random() < 0.2:
        kw["precision"] = rng.choice(["fp32", "int8", "bf16", "fp16", "", None, 8])
        if rng.random() < 0.5:
            kw["calibration"] = rng.choice([ctx.in_path(rng), ctx.files["dir"], 5])
        if rng.random() < 0.3:
            kw["calibrate"] = rng.choice(["max", "kl", "percentile", "bogus", ""])
    if rng.random() < 0.2:
        kw["configs"] = rng.choice([
            {}, {"bogus": {}}, {"dense_pack.x86(data=[2,8],weight=[8,4],dtype=float32)": "not json"},
            {"dense_pack.x86(data=[2,8],weight=[8,4],dtype=float32)": {"tile_y": -1}},
            {"dense_pack.x86(data=[2,8],weight=[8,4],dtype=float32)": {}}, {"": ""}, {5: 5},
            "x", [1]])
    if rng.random() < 0.15:
        kw["require_tuned"] = rng.choice([True, False])
    model = model_arg(rng, ctx)
    desc = f"kiln.build({short(model)}, **{short(kw)})"

    def call():
        pkg = ctx.kiln.build(model, **kw)
        str(pkg.report), pkg.graph_json, pkg.target, pkg.format
        if rng.random() < 0.5:
            pkg.export(ctx.out_path(rng))
        if rng.random() < 0.3 and pkg.format == "tar":
            m = pkg.load()
            for info in m.input_info():
                if info.dtype == "float32" and all(0 < d < 100 for d in info.shape):
                    m.run(**{info.name: ctx.np.ones(info.shape, ctx.np.float32)})
    return desc, call


def gen_export(rng, ctx):
    path = ctx.out_path(rng)
    fmt = rng.choice([None, None, "tar", "so", "zip", "", 5])
    return f"Package.export({short(path)}, format={fmt!r})", lambda: ctx.package.export(path, fmt)


def gen_load(rng, ctx):
    import pathlib
    path = rng.choice([ctx.in_path(rng), pathlib.Path(ctx.package_path), None, 5, b"x"])

    def call():
        m = ctx.kiln.runtime.load(path)
        repr(m), m.input_info(), m.num_outputs
    return f"kiln.runtime.load({short(path)})", call


def odd_array(rng, ctx, shape=(2, 8), dtype="float32"):
    np = ctx.np
    good = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    pick = rng.randrange(22)
    return [
        lambda: good,
        lambda: good.astype(np.float64),
        lambda: good.astype(np.int32),
        lambda: good.astype(np.int64),
        lambda: good.astype(bool),
        lambda: good.astype(np.float16),
        lambda: good.astype(np.complex64),
        lambda: good.astype(object),
        lambda: good.astype(good.dtype.newbyteorder(">")),
        lambda: np.asfortranarray(np.ones(shape[::-1], dtype)).T,
        lambda: np.ones((shape[0] * 2,) + tuple(shape[1:]), dtype)[::2],
        lambda: np.ones(tuple(shape) + (1,), dtype),
        lambda: np.ones(shape[:-1], dtype),
        lambda: np.ones((0,) + tuple(shape[1:]), dtype),
        lambda: np.array(1, dtype),
        lambda: None,
        lambda: good.tolist(),
        lambda: "text",
        lambda: np.full(shape, np.nan, dtype),
        lambda: np.ones(tuple(reversed(shape)), dtype),
        lambda: np.array(["a", "b"]),
        lambda: np.ones(shape, dtype)[..., ::-1],
    ][pick]()


def odd_key(rng):
    return rng.choice(["x", "x", 0, "y", "", "X", -1, 1, 99, 2 ** 63, 1.0, None, True,
                       "a" * 300, "\u00e9", b"x"])


def gen_run(rng, ctx):
    m = ctx.module
    if rng.random() < 0.2:
        m = ctx.int_module
        kw = {k: odd_array(rng, ctx, (3,), "int32") for k in rng.sample(["a", "b", "c"], rng.randrange(4))}
    else:
        kw = {"x": odd_array(rng, ctx)}
        if rng.random() < 0.2:
            kw[rng.choice(["y", "X", "", "input"])] = odd_array(rng, ctx)
        if rng.random() < 0.1:
            kw = {}
    return f"GraphModule.run(**{short(kw)})", lambda: m.run(**kw)


def gen_set_input(rng, ctx):
    key, value = odd_key(rng), odd_array(rng, ctx)
    return f"GraphModule.set_input({short(key)}, {short(value)})", lambda: ctx.module.set_input(key, value)


def gen_get_output(rng, ctx):
    index = rng.choice([0, 1, 2, -1, -2, 99, 2 ** 63, 2 ** 31, "0", None, 1.0, True,
                        ctx.np.int32(1), ctx.np.int64(-1), ctx.np.uint64(2 ** 63)])
    copy = rng.choice([True, False, None, 0, 1, "no"])

    def call():
        if rng.random() < 0.5:
            ctx.module.run()
        return ctx.module.get_output(index, copy=copy)
    return f"GraphModule.get_output({short(index)}, copy={copy!r})", call


def gen_input_view(rng, ctx):
    key = odd_key(rng)

    def call():
        v = ctx.module.input_view(key)
        v[...] = 1
    return f"GraphModule.input_view({short(key)})", call


def gen_benchmark(rng, ctx):
    repeat = rng.choice([1, 2, 0, -1, -2 ** 40, 2 ** 31, 2 ** 64, "3", None, 2.5, True])
    warmup = rng.choice([0, 1, -1, 2 ** 31, "1", None, 0.5])
    if rng.random() < 0.3:
        return "GraphModule.profile()", ctx.module.profile
    return (f"GraphModule.benchmark(repeat={repeat!r}, warmup={warmup!r})",
            lambda: ctx.module.benchmark(repeat=repeat, warmup=warmup))


def gen_threads(rng, ctx):
    n = rng.choice([0, 1, 2, -1, 3, 16, 2 ** 31, -2 ** 40, 2 ** 64, "2", None, 1.5])

    def call():
        try:
            ctx.kiln.runtime.set_num_threads(n)
            ctx.module.run()
            ctx.kiln.runtime.num_threads()
        finally:
            ctx.kiln.runtime.set_num_threads(0)
    return f"kiln.runtime.set_num_threads({n!r})", call


def gen_records(rng, ctx):
    db = ctx.db
    what = rng.randrange(11)
    if what == 0:
        path = rng.choice([ctx.in_path(rng), ctx.out_path(rng), ":memory:", "file::memory:",
                           "postgresql://127.0.0.1:1/kiln", "mysql://h/db", "sqlite://x",
                           "postgresql://", None, 5])
        create = rng.choice([True, False, None, "yes"])

        def call():
            d = ctx.kiln.records.open(path, create=create)
            len(d), d.targets(), repr(d)
        return f"kiln.records.open({short(path)}, create={create!r})", call
    if what == 1:
        return "Database.targets()", db.targets
    if what == 2:
        t = rng.choice([None, "", "x", ctx.kiln.records.target_key(), "\u00e9", 5])
        return f"Database.workloads({short(t)})", lambda: db.workloads(t)
    if what in (3, 4):
        w = rng.choice(["", "x", "dense_pack.x86(data=[2,8],weight=[8,4],dtype=float32)",
                        "'; DROP TABLE records; --", "%", "\u00e9" * 100, None, 5])
        t = rng.choice([None, "", "x", 5])
        fn = db.records if what == 3 else db.best
        return f"Database.{fn.__name__}({short(w)}, {short(t)})", lambda: fn(w, t)
    if what == 5:
        return "Database.best_records()", db.best_records
    if what in (6, 7):
        path = ctx.out_path(rng)
        w = rng.choice([None, "", "x", "dense_pack.x86(data=[2,8],weight=[8,4],dtype=float32)"])
        best = rng.choice([True, False, None, "no"])
        return (f"Database.export({short(path)}, workload={w!r}, best={best!r})",
                lambda: db.export(path, workload=w, best=best))
    if what == 8:
        path = rng.choice([ctx.in_path(rng), ctx.jsonl, None, 5])
        return f"Database.import_({short(path)})", lambda: db.import_(path)
    if what == 9:
        t = target(rng)
        return f"kiln.records.target_key({t!r})", lambda: ctx.kiln.records.target_key(t)
    return "len(Database), repr(Database)", lambda: (len(db), repr(db))


def gen_tasks(rng, ctx):
    models = rng.choice([model_arg(rng, ctx), [ctx.models["static"], ctx.models["dynamic"]], [],
                         [ctx.models["static"], None]])
    kw = {}
    if rng.random() < 0.5:
        kw["input_shapes"] = input_shapes(rng, ctx)
    if rng.random() < 0.3:
        kw["target"] = target(rng)
    if rng.random() < 0.4:
        kw["tuning_log"] = rng.choice([ctx.db_path, ctx.in_path(rng)])
    return f"kiln.tasks({short(models)}, **{short(kw)})", lambda: ctx.kiln.tasks(models, **kw)


def gen_tune(rng, ctx):
    """kiln.tune with tiny budgets: at most a few trials, a short time budget."""
    model = rng.choice([ctx.models["static"], ctx.models["static"], ctx.model_bytes,
                        ctx.models["dynamic"], model_arg(rng, ctx)])
    log = rng.choice([ctx.db_path, ctx.db_path, os.path.join(ctx.work, "out", f"t{rng.randrange(9)}.db"),
                      ctx.in_path(rng), ctx.out_path(rng)])
    kw = {"trials": rng.choice([0, 1, 2, -1]), "time_budget": rng.choice([None, 3.0, 0.001, 0.5])}
    kw["in_graph"] = rng.choice([0, 0, 1])
    for name, values in (
            ("time_budget", [-1, float("nan"), float("inf"), "1", 1e-300]),
            ("tuner", ["xgb", "random", "grid", "bogus", "", None]),
            ("batch", [0, 1, -1, 2 ** 40]),
            ("early_stopping", [0, -1, 1]),
            ("number", [0, -1, 1]), ("repeat", [0, -1, 1]),
            ("min_repeat_ms", [-1.0, 0.0, float("nan")]),
            ("timeout", [0.0, -1.0, 0.001, float("nan")]),
            ("compile_budget", [0.0, -1.0, float("nan")]),
            ("weights", ["cold", "warm", "auto", "hot", ""]),
            ("in_graph", [-1, 2 ** 40]),
            ("runner", ["", "bogus", "tcp://127.0.0.1:1"]),
            ("input_shapes", [None, "x:[2,8]", "x:[0,8]", "x:["]),
            ("target", [None, "llvm -mcpu=bogus", "cuda"]),
            ("report", [None]),
            ("callbacks", [None, lambda info: True, lambda info: 1 / 0, 5, [print], lambda: None])):
        if rng.random() < 0.12:
            kw[name] = rng.choice(values)
    if rng.random() < 0.15:
        kw["report"] = ctx.out_path(rng)
    if kw.get("trials", 0) > 0 and not kw.get("time_budget"):
        kw["time_budget"] = 3.0  # tiny budgets only
    desc = f"kiln.tune({short(model)}, {short(log)}, **{short(kw)})"
    return desc, lambda: ctx.kiln.tune(model, log, **kw)


GENERATORS = [  # (weight, generator)
    (6, gen_build), (4, gen_export), (5, gen_load), (14, gen_run), (8, gen_set_input),
    (8, gen_get_output), (4, gen_input_view), (3, gen_benchmark), (2, gen_threads),
    (12, gen_records), (4, gen_tasks), (1, gen_tune)]


def short(v, limit=160):
    """A call's argument as text, arrays and long strings abbreviated."""
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return f"<array {v.dtype} {list(v.shape)}{'' if v.flags.c_contiguous else ' strided'}>"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{short(k)}: {short(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)) and len(v) <= 8:
        s = ", ".join(short(x) for x in v)
        return f"[{s}]" if isinstance(v, list) else f"({s}{',' if len(v) == 1 else ''})"
    if hasattr(v, "SerializeToString"):
        return "<onnx.ModelProto>"
    if callable(v) and getattr(v, "__name__", "") == "<lambda>":
        return "<lambda>"
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 20] + f"...<{len(s)} chars>"


ALLOWED = None  # set in worker(): (kiln.KilnError, TypeError, ValueError, IndexError)


def judge(e):
    """None if exception `e` is a clear, allowed error, else why not."""
    msg = str(e)
    if isinstance(e, ZeroDivisionError) and "division by zero" in msg:
        return None  # a callback's own exception, propagated as documented
    if not isinstance(e, ALLOWED):
        return f"unexpected exception type {type(e).__module__}.{type(e).__name__}: {msg[:300]}"
    if not msg.strip():
        return f"{type(e).__name__} with an empty message"
    if "incompatible function arguments" in msg or "incompatible constructor arguments" in msg:
        return f"pybind11's message, not kiln's: {type(e).__name__}: {msg.splitlines()[0][:200]}"
    for temp in ("kiln-pymodel-", "kiln-pypkg-"):
        if temp in msg:
            return f"the message names a temporary file ({temp}*): {msg[:300]}"
    return None


def worker(args):
    global ALLOWED
    ctx = Ctx(args.work)
    kiln = ctx.kiln
    ALLOWED = (kiln.KilnError, TypeError, ValueError, IndexError)
    weights = [w for w, _ in GENERATORS]
    deadline = time.monotonic() + args.seconds if args.seconds else None
    out = sys.stdout
    i = args.start
    end = args.start + args.calls if args.calls else None
    while (end is None or i < end) and (deadline is None or time.monotonic() < deadline):
        rng = random.Random(f"{args.seed}:{i}")
        gen = rng.choices(GENERATORS, weights)[0][1]
        try:
            desc, call = gen(rng, ctx)
        except Exception as e:  # a generator's own bug: report it, do not hide it
            desc, call = f"{gen.__name__} (generating the call)", None
            print(f"BAD {i} {desc}: {type(e).__name__}: {e}", file=out, flush=True)
        if call is not None:
            print(f"CALL {i} {desc}", file=out, flush=True)
            started = time.monotonic()
            try:
                call()
                outcome = "ok"
            except BaseException as e:  # noqa: B902 - judged, never swallowed silently
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                why = judge(e)
                if why:
                    print(f"BAD {i} {desc}: {why}", file=out, flush=True)
                outcome = type(e).__name__
            harm = ctx.damage()
            if harm:
                print(f"BAD {i} {desc}: {harm}", file=out, flush=True)
            print(f"DONE {i} {outcome} {time.monotonic() - started:.3f}", file=out, flush=True)
        i += 1
    print(f"END {i}", file=out, flush=True)
    return 0


# ---- the driver: runs workers, catches crashes and hangs --------------------------------------

def drive(args):
    work = args.work or tempfile.mkdtemp(prefix="kiln-pyfuzz-")
    keep = bool(args.work)
    findings, outcomes, times = [], {}, {}
    start = time.monotonic()
    deadline = start + args.seconds if args.seconds else None
    i, end = args.start, args.start + args.calls if args.calls else None
    restarts = 0
    print(f"python api fuzz: seed {args.seed}, "
          + (f"calls {i}..{end - 1}" if end else f"{args.seconds:g} s from call {i}")
          + f", work {work}", flush=True)
    while (end is None or i < end) and (deadline is None or time.monotonic() < deadline):
        shutil.rmtree(os.path.join(work, "w"), ignore_errors=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(args.seed),
               "--start", str(i), "--work", os.path.join(work, "w")]
        if end:
            cmd += ["--calls", str(end - i)]
        if deadline:
            cmd += ["--seconds", str(max(deadline - time.monotonic(), 0.1))]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             text=True, bufsize=1, start_new_session=True)
        current, last_seen, buf, ended = None, time.monotonic(), "", False
        setup_timeout = max(args.call_timeout, 120)
        while True:
            ready, _, _ = select.select([p.stdout], [], [], 1.0)
            if ready:
                line = p.stdout.readline()
                if not line:
                    break
                last_seen = time.monotonic()
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "CALL":
                    n, _, desc = rest.partition(" ")
                    current = (int(n), desc)
                elif kind == "DONE":
                    n, outcome, secs = rest.split(" ")
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    name = current[1].split("(")[0] if current else "?"
                    times[name] = times.get(name, 0.0) + float(secs)
                    i, current = int(n) + 1, None
                elif kind == "BAD":
                    n, _, why = rest.partition(" ")
                    findings.append(f"seed {args.seed} call {n}: {why}")
                    print(f"FINDING: seed {args.seed} call {n}: {why}", flush=True)
                elif kind == "END":
                    i, ended = int(rest), True
                continue
            limit = args.call_timeout if current else setup_timeout
            if time.monotonic() - last_seen > limit:
                os.killpg(p.pid, signal.SIGKILL)
                what = f"call {current[0]}: {current[1]}" if current else f"setup before call {i}"
                findings.append(f"seed {args.seed} {what}: hung (no answer in {limit:g} s)")
                print(f"FINDING: {findings[-1]}", flush=True)
                break
        p.wait()
        err = p.stderr.read()
        if ended and p.returncode == 0:
            break
        if p.returncode != 0 and not (findings and "hung" in findings[-1]):
            sig = -p.returncode if p.returncode < 0 else None
            how = (f"killed by {signal.Signals(sig).name}" if sig else f"exit status {p.returncode}")
            what = f"call {current[0]}: {current[1]}" if current else f"setup before call {i}"
            tail = "\n    ".join(err.strip().splitlines()[-12:])
            findings.append(f"seed {args.seed} {what}: the worker was {how}\n    {tail}")
            print(f"FINDING: {findings[-1]}", flush=True)
            if current is None:
                break  # the setup itself fails: nothing to fuzz
        if current is not None:
            i = current[0] + 1  # go on after the call that crashed or hung
        restarts += 1
        if restarts > 50:
            findings.append("more than 50 worker crashes: stopped")
            break
    elapsed = time.monotonic() - start
    calls = sum(outcomes.values())
    summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1]))
    slow = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(times.items(), key=lambda kv: -kv[1])[:4])
    print(f"python api fuzz: {calls} calls in {elapsed:.1f} s (outcomes: {summary}; time in: {slow}); "
          f"{len(findings)} finding(s)", flush=True)
    if findings:
        print("findings (reproduce one with --seed S --start N --calls 1):")
        for f in findings:
            print(f"  {f}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if findings else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    ap.add_argument("--calls", type=int, default=0, help="how many calls (0: until --seconds)")
    ap.add_argument("--seconds", type=float, default=0, help="how long (0: until --calls)")
    ap.add_argument("--start", type=int, default=0, help="the first call's number")
    ap.add_argument("--call-timeout", type=float, default=120, help="a call slower than this hangs")
    ap.add_argument("--work", default=None, help="a folder for the fixtures (default: a temporary one)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2 ** 31)
    if args.worker:
        return worker(args)
    if not args.calls and not args.seconds:
        args.calls = 300
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
