"""The core stays portable: no libc symbol, no header but the compiler's own.
(The build itself enforces -nostdinc and, on x86, -mgeneral-regs-only.)"""

from __future__ import annotations

import glob
import os
import re
import subprocess

from replaylib import DATAPATH


def test_core_library_references_only_its_own_symbols():
    out = subprocess.run(["nm", "-u", os.path.join(DATAPATH, "build", "libaqmcore.a")],
                         capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip() and ":" not in line}
    foreign = sorted(s for s in undefined if not s.startswith("aqm_"))
    assert not foreign, foreign


def test_core_includes_only_compiler_headers():
    for path in glob.glob(os.path.join(DATAPATH, "core", "*.[ch]")):
        with open(path) as f:
            system = re.findall(r'#include\s*<([^>]+)>', f.read())
        assert set(system) <= {"stdint.h", "stddef.h"}, (path, system)
