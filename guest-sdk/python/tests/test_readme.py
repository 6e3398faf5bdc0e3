"""The README's walkthrough works as written: its plugin.py and test_plugin.py, copied into an
empty directory, pass their tests."""

import re
import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]


def test_the_readme_plugin_passes_its_own_tests_from_an_empty_directory(tmp_path):
    plugin, test = re.findall(r"```python\n(.*?)```", (SDK / "README.md").read_text(), re.S)[:2]
    (tmp_path / "plugin.py").write_text(plugin)
    (tmp_path / "test_plugin.py").write_text(test)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(SDK), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
