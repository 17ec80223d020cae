#!/usr/bin/env python3
"""Soak test: three `kiln tune` processes share one job and one PostgreSQL
records database (issue 15, item 6); one of them is killed with -9 midway.

A throwaway PostgreSQL 15 server is started on 127.0.0.1 at a free port
(initdb into a temporary directory; as `nobody` when run as root), and stopped
and deleted at the end, also when this script fails or is killed (a watchdog
shell holds a pipe to it). A job file names one small model (three tasks) and
postgresql://kiln@127.0.0.1:PORT/soak; `kiln tune --job` runs it and two
`kiln tune --worker --job` join it. Once a third of all trials are stored
(--kill-after seconds at the latest) the `--job` process is killed with
SIGKILL and not restarted; the workers finish the job. After they exit:

  - every task reached its trial count (the dead tuner's leases were taken over);
  - no (workload, target, config) was measured twice;
  - every record seen after the kill is still there, unchanged;
  - no lease is left;
  - the record count equals that of one `kiln tune` alone on a sqlite file with
    the same trials.

  tune_pg_soak.py --kiln build/kiln [--trials 16]

Exit 0 when every check holds, 77 when no PostgreSQL server could be started
(ctest reports it as skipped), 1 with the failed checks listed.
"""
import argparse
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_kill_soak import make_model  # noqa: E402  (the same three-task model)

SKIP = 77


class PgServer:
    """initdb + pg_ctl in a temporary directory; stop() or process exit removes it."""

    def __init__(self, bin_dir):
        self.bin = bin_dir
        for tool in ("initdb", "pg_ctl", "postgres", "psql"):
            if not os.access(os.path.join(bin_dir, tool), os.X_OK):
                raise RuntimeError(f"no PostgreSQL {tool} in {bin_dir}")
        self.dir = tempfile.mkdtemp(prefix="kiln-pg-")
        self.as_user = []
        if os.geteuid() == 0:
            # The server refuses to run as root.
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self.as_user = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                            "--clear-groups", "--"]
        os.chmod(self.dir, 0o700)
        data = os.path.join(self.dir, "data")
        pg_ctl = " ".join(shlex.quote(a) for a in self.as_user + [os.path.join(bin_dir, "pg_ctl")])
        stop = (f"{pg_ctl} -D {shlex.quote(data)} -m fast -w -t 20 stop >/dev/null 2>&1 || "
                f"{pg_ctl} -D {shlex.quote(data)} -m immediate -w stop >/dev/null 2>&1")
        # The watchdog: when this process ends in any way, its stdin closes.
        self.watchdog = subprocess.Popen(
            ["/bin/sh", "-c", f"cat >/dev/null; [ -f {shlex.quote(data)}/postmaster.pid ] && "
                              f"{{ {stop}; }}; rm -rf {shlex.quote(self.dir)}"],
            stdin=subprocess.PIPE)
        r = subprocess.run(self.as_user + [os.path.join(bin_dir, "initdb"), "-D", data, "-U",
                                           "kiln", "-A", "trust", "--no-sync", "-E", "UTF8",
                                           "--locale=C"], capture_output=True, text=True)
        if r.returncode != 0:
            self.stop()
            raise RuntimeError("initdb failed: " + r.stdout[-500:] + r.stderr[-500:])
        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                    "-c max_connections=100")
            r = subprocess.run(self.as_user + [os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l",
                                               os.path.join(self.dir, "server.log"), "-w", "-t",
                                               "30", "-o", opts, "start"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return
        log = open(os.path.join(self.dir, "server.log")).read()[-800:]
        self.stop()
        raise RuntimeError("the server did not start: " + log)

    def url(self, db="postgres"):
        return f"postgresql://kiln@127.0.0.1:{self.port}/{db}"

    def psql(self, db, sql):
        r = subprocess.run([os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t", "-v",
                            "ON_ERROR_STOP=1", self.url(db), "-c", sql],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"psql {sql}: {r.stderr}")
        return r.stdout.strip()

    def stop(self):
        if self.watchdog:
            self.watchdog.stdin.close()
            self.watchdog.wait()
            self.watchdog = None


def export(kiln, db):
    """Every record of a store, as (workload, target, config) -> JSON line."""
    r = subprocess.run([kiln, "records", "export", db, "-o", "-"], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        if "holds no kiln records" in r.stderr:
            return []
        raise RuntimeError(f"kiln records export {db}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def tune_cmd(args, model, db, tuner):
    return [args.kiln, "tune", model, "--tuning-log", db, "--trials", str(args.trials),
            "--tuner", tuner, "--batch", "4", "--repeat", "1", "--number", "1", "--in-graph", "0"]


def write_job(path, model, db, trials):
    with open(path, "w") as f:
        f.write(f'tuning_log = "{db}"\ntrials = {trials}\nbatch = 4\n\n'
                f'[[model]]\nname = "soak"\npath = "{model}"\n')


def job_cmd(args, job, tuner, worker):
    return ([args.kiln, "tune"] + (["--worker"] if worker else []) +
            ["--job", job, "--tuner", tuner, "--repeat", "1", "--number", "1"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--kill-after", type=float, default=60.0,
                    help="the kill comes when a third of the trials are stored, or after this")
    ap.add_argument("--pg-bin", default=os.environ.get("KILN_PG_BIN",
                                                       "/usr/lib/postgresql/15/bin"))
    ap.add_argument("--workdir", default=None, help="keep the model, logs and sqlite file here")
    args = ap.parse_args()

    try:
        server = PgServer(args.pg_bin)
    except (RuntimeError, OSError, KeyError) as e:
        print(f"pg soak: SKIPPED: no PostgreSQL server could be started: {e}")
        return SKIP
    work = args.workdir or tempfile.mkdtemp(prefix="kiln-pg-soak-")
    os.makedirs(work, exist_ok=True)
    failures = []
    try:
        server.psql("postgres", "CREATE DATABASE soak")
        url = server.url("soak")
        model = os.path.join(work, "soak.onnx")
        make_model(model)
        job = os.path.join(work, "soak.toml")
        write_job(job, model, url, args.trials)
        print(f"pg soak: {url}, one job, 3 tuners ({args.trials} trials per task), the --job "
              "one killed midway")

        t0 = time.time()
        tuners, logs = [], []
        # Two random workers (same seed: they propose the same configs) and the xgb job runner.
        for i, (tuner, worker) in enumerate([("random", True), ("xgb", False), ("random", True)]):
            logs.append(os.path.join(work, f"tuner{i}.log"))
            tuners.append(subprocess.Popen(job_cmd(args, job, tuner, worker),
                                           stdout=open(logs[-1], "w"), stderr=subprocess.STDOUT))
        # Midway: once a third of all trials are stored (or --kill-after at the latest).
        victim = tuners[1]
        deadline = time.time() + args.kill_after
        while time.time() < deadline and victim.poll() is None:
            try:
                if int(server.psql("soak", "SELECT count(*) FROM records")) >= args.trials:
                    break
            except RuntimeError:
                pass  # no schema yet
            time.sleep(0.5)
        killed = victim.poll() is None
        if killed:
            victim.send_signal(signal.SIGKILL)
        victim.wait()
        seen = {(r["workload"], r["target"], json.dumps(r["config"], sort_keys=True)):
                json.dumps(r, sort_keys=True) for r in export(args.kiln, url)}
        rcs = [p.wait(timeout=900) for p in (tuners[0], tuners[2])]
        elapsed = time.time() - t0

        records = export(args.kiln, url)
        keys = [(r["workload"], r["target"], json.dumps(r["config"], sort_keys=True))
                for r in records]
        per_task = {}
        for w, t, _ in keys:
            per_task[(w, t)] = per_task.get((w, t), 0) + 1
        now = {k: json.dumps(r, sort_keys=True) for k, r in zip(keys, records)}
        leases = int(server.psql("soak", "SELECT count(*) FROM claims"))

        # The reference: one tuner alone on a sqlite file, same trials.
        ref_db = os.path.join(work, "reference.db")
        ref = subprocess.run(tune_cmd(args, model, ref_db, "random"), capture_output=True,
                             text=True, timeout=900)
        ref_count = len(export(args.kiln, ref_db)) if ref.returncode == 0 else -1

        if not killed:
            failures.append("the tuner to kill had finished before the kill")
        if rcs != [0, 0]:
            failures.append(f"the surviving tuners exited {rcs} (logs in {work})")
        if len(set(keys)) != len(keys):
            failures.append(f"{len(keys) - len(set(keys))} configs measured twice")
        short = {k[0]: n for k, n in per_task.items() if n < args.trials}
        if len(per_task) != 3 or short:
            failures.append(f"tasks short of {args.trials} trials: {per_task}")
        lost = [k for k, line in seen.items() if now.get(k) != line]
        if lost:
            failures.append(f"{len(lost)} records seen after the kill lost or changed, e.g. "
                            f"{lost[0]}")
        if leases:
            failures.append(f"{leases} leases left")
        if ref.returncode != 0:
            failures.append(f"the sqlite reference run exited {ref.returncode}: "
                            f"{ref.stderr[-1000:]}")
        elif ref_count != len(records):
            failures.append(f"{len(records)} records in PostgreSQL, {ref_count} from one "
                            f"process on sqlite")
        print(f"pg soak: {len(records)} records in {elapsed:.0f} s ({len(seen)} seen when one "
              f"was killed), tasks {sorted(per_task.values())}, {leases} leases left, sqlite "
              f"reference {ref_count} records")
    finally:
        server.stop()
    if failures:
        print("pg soak: FAILED (model and logs kept in " + work + ")")
        for f in failures:
            print("  - " + f)
        return 1
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print("pg soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
