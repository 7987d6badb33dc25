"""Packaging: the Python package installs with pip from the repository
(offline, --no-build-isolation) and carries the plug-in's library, and
`make install PREFIX=...` puts the CLI, the package and the converter
`vrambench tune` looks for where they belong. Each runs in a temporary
copy or prefix: the checkout is never written."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, **options):
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **options)


class PipInstall(unittest.TestCase):
    def test_pip_installs_the_package_with_the_library_beside_it(self):
        with tempfile.TemporaryDirectory() as work:
            source = os.path.join(work, "src")
            os.makedirs(source)
            for name in ("pyproject.toml", "README.md", "LICENSE"):
                shutil.copy(os.path.join(REPO, name), source)
            shutil.copytree(os.path.join(REPO, "python"), os.path.join(source, "python"),
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
            # What `make plugin` leaves beside the module (a stand-in: only its presence is checked).
            with open(os.path.join(source, "python", "vrambench", "libvrambench_torch.so"), "wb") as lib:
                lib.write(b"\x7fELF stand-in")
            target = os.path.join(work, "site")
            done = run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", target, source])
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            probe = ("import vrambench.plugin as p, vrambench.torch2trace, vrambench.results_tables, "
                     "vrambench.plots.cli; print(p.library_path())")
            env = dict(os.environ, PYTHONPATH=target)
            env.pop("VRAMBENCH_TORCH_LIB", None)
            found = run([sys.executable, "-c", probe], env=env, cwd=work)
            self.assertEqual(found.returncode, 0, found.stderr)
            self.assertEqual(found.stdout.strip(), os.path.join(target, "vrambench", "libvrambench_torch.so"))

    def test_a_missing_library_is_one_clear_error_naming_where_it_looked(self):
        with tempfile.TemporaryDirectory() as work:
            shutil.copytree(os.path.join(REPO, "python", "vrambench"), os.path.join(work, "vrambench"),
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            env = dict(os.environ, PYTHONPATH=work)
            env.pop("VRAMBENCH_TORCH_LIB", None)
            done = run([sys.executable, "-c", "import vrambench.plugin as p; p.library_path()"], env=env, cwd=work)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("FileNotFoundError: libvrambench_torch.so not found (looked in", done.stderr)
            self.assertIn("make plugin", done.stderr)


@unittest.skipUnless(shutil.which("make"), "make is not installed")
class MakeInstall(unittest.TestCase):
    def test_make_install_puts_the_cli_the_package_and_the_converter_under_prefix(self):
        with tempfile.TemporaryDirectory() as prefix:
            args = shlex.split(os.environ.get("VB_MAKE_ARGS", ""))
            done = run(["make", "--no-print-directory", "-C", REPO, "install", f"PREFIX={prefix}",
                        f"PYTHON={sys.executable}", *args])
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            cli = os.path.join(prefix, "bin", "vrambench")
            self.assertEqual(run([cli, "--help"]).returncode, 0)
            self.assertTrue(os.path.isfile(os.path.join(prefix, "share", "vrambench", "python", "vrambench",
                                                        "torch2trace.py")))
            site = [line for line in done.stdout.splitlines() if "the Python package in" in line]
            self.assertTrue(site, done.stdout)
            path = site[0].split("the Python package in ", 1)[1].split(" ", 1)[0]
            self.assertTrue(path.startswith(prefix), path)
            imported = run([sys.executable, "-c", "import vrambench.torch2trace, vrambench.plots.cli"],
                           env=dict(os.environ, PYTHONPATH=path), cwd=prefix)
            self.assertEqual(imported.returncode, 0, imported.stderr)
            # The installed binary finds its data and its Python with no variable
            # set, from a folder outside the repository: check-sim's documented
            # differences were looked for only above the binary.
            environment = {k: v for k, v in os.environ.items()
                           if k not in ("VRAMBENCH_SIM_DIFFERENCES", "VB_PYTHON_DIR")}
            results = os.path.join(REPO, "results", "claims-nvidia-h100-80gb-hbm3-20261123.json")
            checked = run([cli, "check-sim", results], env=environment, cwd=prefix)
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
            self.assertIn("cases checked", checked.stdout)
            page = os.path.join(prefix, "page.html")
            made = run([cli, "report", results, "-o", page, "--no-plots"], env=environment, cwd=prefix)
            self.assertEqual(made.returncode, 0, made.stderr)
            self.assertTrue(os.path.isfile(page))


    def test_a_prefix_with_a_quote_or_dollar_is_refused_in_one_line_and_nothing_is_installed(self):
        # the package's folder is worked out by a quoted Python command: such a
        # prefix either failed with a misleading line or put the package elsewhere
        with tempfile.TemporaryDirectory() as work:
            args = shlex.split(os.environ.get("VB_MAKE_ARGS", ""))
            for name in ("it's", 'a"b', "d$$x"):
                with self.subTest(name=name):
                    prefix = os.path.join(work, name)
                    done = run(["make", "--no-print-directory", "-C", REPO, "install", f"PREFIX={prefix}",
                                f"PYTHON={sys.executable}", *args])
                    self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
                    ours = [line for line in done.stderr.splitlines() if line.startswith("make install: error:")]
                    self.assertEqual(len(ours), 1, done.stderr)
                    self.assertIn("cannot hold a quote or a dollar sign", ours[0])
                    self.assertEqual(os.listdir(work), [])

if __name__ == "__main__":
    unittest.main()
