"""The bench's check that the machine is quiet before a section."""
from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from bench.families import cpu_busy_fraction


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_cpu_busy_fraction_sees_a_spinning_core():
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.2)
        busy = cpu_busy_fraction(1.0)
    finally:
        stop.set()
        t.join()
    assert busy is not None and 0.0 <= busy <= 1.0
    assert busy >= 0.6 / (os.cpu_count() or 1)  # one of the cores was kept busy
