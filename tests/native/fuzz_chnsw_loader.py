"""atheris fuzz target for the C-HNSW loader (run by test_chnsw_io.py::test_fuzz_loader_atheris).

Usage: python fuzz_chnsw_loader.py [CORPUS_DIR] -max_total_time=20

The compiled loader carries no coverage instrumentation, so libFuzzer alone would shrink its
corpus to a few bytes that never get past the magic check. The target is therefore
structure-aware: the fuzz input drives a list of edits (set a byte, overwrite a little-endian
u32 such as a count or an index, delete or insert a range, truncate) applied to valid serialised
indexes, and in most modes the CRCs are recomputed so the edit reaches the payload
parser even with verify_checksum=True. In one mode in eight the raw input is parsed.

A parse must either raise ValueError or give an index that can be searched and re-serialised;
anything else (another exception, a crash, a hang) is a finding.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import zlib

import atheris
import numpy as np
from graphstrata_chnsw import CHNSW

HEADER = 40


def _bases() -> list[bytes]:
    rng = np.random.default_rng(3)
    out = []
    for metric, dim, sizes in (("cosine", 8, (24, 6, 2)), ("l2", 4, (12, 3)), ("ip", 16, (9,))):
        index = CHNSW(dim, metric=metric, M=4, ef_construction=16, scan_threshold=0)
        for n in sizes:
            index.add_layer(rng.normal(size=(n, dim)).astype(np.float32))
        index.mark_deleted(1)
        out.append(index.to_bytes())
    return out


BASES = _bases()


def _fix_crcs(buf: bytearray) -> None:
    """Make the header agree with the (edited) payload: size and both CRCs."""
    if len(buf) >= HEADER:
        struct.pack_into("<Q", buf, 16, len(buf) - HEADER)
        struct.pack_into("<I", buf, 24, zlib.crc32(bytes(buf[HEADER:])))
        struct.pack_into("<I", buf, 32, zlib.crc32(bytes(buf[:32])))


def _mutated(fdp: atheris.FuzzedDataProvider) -> bytes:
    # Raw input is one mode in eight: with the old one in four, and an exhausted provider turning
    # every edit into "set byte 0 to 0", 77 % of the executions stopped at the magic check.
    mode = fdp.ConsumeIntInRange(0, 7)
    if mode == 7:
        return fdp.ConsumeBytes(fdp.remaining_bytes())
    buf = bytearray(BASES[fdp.ConsumeIntInRange(0, len(BASES) - 1)])
    for _ in range(fdp.ConsumeIntInRange(1, 6)):
        if not buf or not fdp.remaining_bytes():
            break
        kind = fdp.ConsumeIntInRange(0, 4)
        pos = fdp.ConsumeIntInRange(0, len(buf) - 1)
        if kind == 0:
            buf[pos] = fdp.ConsumeIntInRange(0, 255)
        elif kind == 1 and len(buf) >= 4:
            pos = min(pos, len(buf) - 4)
            val = fdp.PickValueInList([0, 1, 2, 0xFFFFFFFF, 0x7FFFFFFF, 0x10000, fdp.ConsumeIntInRange(0, 2**32 - 1)])
            struct.pack_into("<I", buf, pos, val)
        elif kind == 2:
            del buf[pos : pos + fdp.ConsumeIntInRange(1, 64)]
        elif kind == 3:
            buf[pos:pos] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 16))
        else:
            del buf[pos:]
    if mode >= 2:  # 5 of the 7 structured modes: the header agrees, the edit reaches the parser
        _fix_crcs(buf)
    return bytes(buf)


def _exercise(index) -> None:
    if index.num_layers == 0:
        return
    q = np.ones(index.dim, dtype=np.float32)
    index.search(q, 3, layer=0, ef_search=8)
    index.search_all_layers(q, 2, ef_search=8)
    data = index.to_bytes()
    assert CHNSW.from_bytes(data).to_bytes() == data


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris naming)
    # No coverage comes back from the compiled loader, so libFuzzer keeps no corpus (not even the
    # seed files) and mutates a 1-byte input: two thirds of its inputs are under 8 bytes. A short
    # input is stretched deterministically (SHAKE-256) into enough choices for a full set of
    # edits; a crash file still reproduces.
    if len(data) < 64:
        data = hashlib.shake_256(data).digest(256)
    blob = _mutated(atheris.FuzzedDataProvider(data))
    for verify in (False, True):
        try:
            index = CHNSW.from_bytes(blob, verify_checksum=verify)
        except ValueError:
            continue
        _exercise(index)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
