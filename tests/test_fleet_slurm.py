"""fleet/slurm-bench.sh on a real one-node Slurm cluster, on the simulated
device: the array job's shards, then the merge and report job once they all
succeeded, and the merged results equal one unsharded replay, case for case.

The test starts its own munged, slurmctld and slurmd (proctrack/linuxproc,
select/cons_tres, one node with this machine's CPUs, ports of its own,
everything under a temporary folder) as root, and stops them whatever
happens. Without root, or without Slurm and munge (make test installs them
as root: build-aux/ensure-deps.sh slurm), it is skipped with the reason."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from cli_support import ROOT, VRAMBENCH, load, memory_figures
import signal_defaults

signal_defaults.restore()

SCRIPT = os.path.join(ROOT, "fleet", "slurm-bench.sh")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol")
ALLOCATORS = "cuda,caching,expandable,bfc"
SHARDS = 3
DEADLINE_S = 90  # the jobs; the daemons' start has its own


def why_skip():
    if os.geteuid() != 0:
        return "needs root to start munged, slurmctld and slurmd"
    missing = [tool for tool in DAEMONS if not shutil.which(tool)]
    if missing:
        return f"Slurm or munge not installed ({', '.join(missing)} missing; make test installs them as root)"
    return None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmBenchArgumentsTest(unittest.TestCase):
    """Bad arguments: one line, exit 2, nothing made (no --out folder), nothing
    submitted (--dry-run, and a PATH whose sbatch only fails)."""

    def test_bad_arguments_are_one_line_and_leave_no_out_folder(self):
        with tempfile.TemporaryDirectory() as work:
            fake = os.path.join(work, "bin")
            os.mkdir(fake)
            with open(os.path.join(fake, "sbatch"), "w") as stream:
                stream.write("#!/bin/sh\nexit 1\n")
            os.chmod(os.path.join(fake, "sbatch"), 0o755)
            os.mkdir(os.path.join(work, "empty"))
            with open(os.path.join(work, "afile"), "w") as stream:
                stream.write("x")
            environment = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
            for arguments, words in ((["--traces", "missing"], "is not a folder"),
                                     (["--traces", "empty"], "no trace in"),
                                     (["--mode", "tune", "--traces", "empty"], "no trace in"),
                                     (["--out", "afile/sub"], "--out"),
                                     (["--out", "afile"], "is not a folder")):
                with self.subTest(arguments=arguments):
                    out = [] if "--out" in arguments else ["--out", "result"]
                    done = subprocess.run(["bash", SCRIPT, *arguments, *out, "--dry-run"], cwd=work,
                                          env=environment, capture_output=True, text=True, timeout=60)
                    self.assertEqual(done.returncode, 2, done.stderr)
                    self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
                    self.assertTrue(done.stderr.startswith("slurm-bench: error: "), done.stderr)
                    self.assertIn(words, done.stderr)
                    self.assertEqual(sorted(os.listdir(work)), ["afile", "bin", "empty"])


@unittest.skipIf(why_skip(), why_skip() or "")
class SlurmFleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="vb-slurm-")
        cls.daemons = []
        cls.env = dict(os.environ, SLURM_CONF=os.path.join(cls.dir, "slurm.conf"))
        try:
            cls.start_cluster()
        except BaseException:
            cls.stop_cluster()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_cluster()

    @classmethod
    def start_cluster(cls):
        d = cls.dir
        with open(os.path.join(d, "munge.key"), "wb") as key:
            key.write(os.urandom(1024))
        os.chmod(os.path.join(d, "munge.key"), 0o600)
        socket_path = os.path.join(d, "munge.socket")
        cls.spawn(["munged", "--foreground", "--force", "--socket", socket_path, "--key-file",
                   os.path.join(d, "munge.key"), "--pid-file", os.path.join(d, "munged.pid"), "--log-file",
                   os.path.join(d, "munged.log"), "--seed-file", os.path.join(d, "munged.seed")])
        cls.wait_for(lambda: os.path.exists(socket_path), 10, "munged's socket")
        host = socket.gethostname().split(".")[0]
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub))
        conf = f"""ClusterName=vbtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket_path}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
        with open(cls.env["SLURM_CONF"], "w") as stream:
            stream.write(conf)
        cls.spawn(["slurmctld", "-D", "-c", "-f", cls.env["SLURM_CONF"]])
        cls.spawn(["slurmd", "-D", "-f", cls.env["SLURM_CONF"], "-N", host])
        cls.wait_for(lambda: cls.slurm("sinfo", "-h", "-o", "%t").strip() == "idle", 30,
                     "the node to be idle")

    @classmethod
    def spawn(cls, command):
        log = open(os.path.join(cls.dir, os.path.basename(command[0]) + ".out"), "w")
        cls.daemons.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=cls.env,
                                            start_new_session=True))
        log.close()

    @classmethod
    def stop_cluster(cls):
        if shutil.which("scancel") and cls.daemons:
            subprocess.run(["scancel", "--user=root"], env=cls.env, capture_output=True, timeout=10)
        for process in reversed(cls.daemons):  # slurmd, slurmctld, then munged
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def slurm(cls, *command):
        completed = subprocess.run(command, env=cls.env, capture_output=True, text=True, timeout=20)
        return completed.stdout

    @classmethod
    def wait_for(cls, ready, seconds, what):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for process in cls.daemons:
                if process.poll() is not None:
                    raise AssertionError(f"{process.args[0]} exited ({process.returncode}) while waiting for {what}; "
                                         f"logs in {cls.dir}")
            if ready():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what} ({seconds} s)")

    def test_sharded_bench_merged_and_reported(self):
        traces = os.path.join(self.dir, "traces")
        os.makedirs(traces)
        for seed, events in ((1, 600), (2, 900)):
            subprocess.run([VRAMBENCH, "gen-trace", "random", "--seed", str(seed), "--events", str(events),
                            "--max-size", "67108864", "--max-live", "1073741824", "-o",
                            os.path.join(traces, f"random-{seed}.trace")], check=True, capture_output=True)
        out = os.path.join(self.dir, "out")
        submitted = subprocess.run([SCRIPT, "--traces", traces, "--shards", str(SHARDS), "--out", out,
                                    "--device", "sim", "--allocator", ALLOCATORS, "--min-time", "0",
                                    "--no-plots", "--vrambench", VRAMBENCH], env=self.env, capture_output=True,
                                   text=True, timeout=60)
        self.assertEqual(submitted.returncode, 0, submitted.stderr)
        jobs = [line for line in self.slurm("squeue", "-h", "-o", "%i %j").splitlines()]
        self.wait_for(lambda: not self.slurm("squeue", "-h", "-o", "%i").strip(), DEADLINE_S,
                      "the shard and merge jobs to finish")
        states = self.slurm("scontrol", "show", "job", "-o")
        for line in states.splitlines():
            self.assertIn("JobState=COMPLETED", line, f"a job did not complete: {line[:300]}")
        self.assertTrue(jobs or states, "no job was submitted")
        self.assertIn("vrambench-merge", states)
        self.assertEqual(states.count("vrambench-shards"), SHARDS, states)

        for seed in (1, 2):
            name = f"random-{seed}.trace"
            shards = sorted(f for f in os.listdir(os.path.join(out, "shards")) if f.startswith(f"replay-{name}."))
            self.assertEqual(len(shards), SHARDS, shards)
            one = os.path.join(self.dir, f"one-{seed}.json")
            subprocess.run([VRAMBENCH, "replay", os.path.join(traces, name), "--allocator", ALLOCATORS,
                            "--device", "sim", "--min-time", "0", "--quiet", "--out", one], check=True,
                           capture_output=True)
            expected = load(one)["benchmarks"]
            merged = load(os.path.join(out, "merged", f"replay-{name}.json"))
            self.assertEqual([e["name"] for e in merged["benchmarks"]], [e["name"] for e in expected])
            for got, want in zip(merged["benchmarks"], expected):
                self.assertEqual(memory_figures(got), memory_figures(want), got["name"])
            self.assertEqual(len(merged["context"]["merged_from"]), SHARDS)
        with open(os.path.join(out, "report.html"), encoding="utf-8") as stream:
            page = stream.read()
        for seed in (1, 2):
            self.assertIn(f"replay-random-{seed}.trace.json", page)
        self.assertIn("replay:random-1.trace", page)


if __name__ == "__main__":
    unittest.main()
