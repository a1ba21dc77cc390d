#!/usr/bin/env python3
"""Per-chunk compression policies, simulated from `keel_compress_policy DIR --per-chunk`.

Each policy picks, for every distinct chunk, a zstd level or raw storage from
what a backup knows before compressing it: its size and the probe's result
(the level-1 frame size of its 32 KiB sample). Sums the bytes stored and the
compressor's CPU from the measured rows, against the default (level 1 behind
the probe, which stores raw a chunk whose sample does not shrink by 1/32).

  build/bench/keel_compress_policy /work/data/mixed4g --per-chunk > chunks.csv
  bench/compress_policy_sim.py chunks.csv
"""

import csv
import sys

SAMPLE = 8 * 4096
PROBE_LIMIT = SAMPLE - SAMPLE // 32  # compress.cc: kProbeCapacity


def probe_rejects(row, limit=PROBE_LIMIT):
    return row["size"] >= 2 * SAMPLE and row["probe1"] >= limit


def stored(row, level):
    """(bytes, CPU ns) of a chunk at `level`; None: raw."""
    if level is None:
        return row["size"], 0
    return min(row[f"s{level}"], row["size"]), row[f"t{level}"]


def default(row):
    return None if probe_rejects(row) else 1


def policies():
    yield "level 1 (default)", default
    for level in (-7, -5, -3, -1, 2, 3):
        yield f"level {level}", lambda r, l=level: None if probe_rejects(r) else l
    for saving in (0.10, 0.15, 0.20):
        limit = int(SAMPLE * (1 - saving))
        yield f"level 1, raw unless the sample saves {saving:.0%}", lambda r, m=limit: None if probe_rejects(r, m) else 1
    for small, level in ((16384, -1), (65536, -1), (65536, -3)):
        yield f"level {level} below {small // 1024} KiB", lambda r, s=small, l=level: default(r) and (l if r["size"] < s else 1)
    for ratio, level in ((0.25, -1), (0.35, -1), (0.45, -1), (0.25, -3)):
        yield (f"level {level} where the sample shrinks below {ratio:.0%}",
               lambda r, q=ratio, l=level: default(r) and (l if r["size"] >= 2 * SAMPLE and r["probe1"] < q * SAMPLE else 1))


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            rows.append({k: (v if k == "kind" else int(v)) for k, v in row.items()})
    total = sum(r["size"] for r in rows)
    print(f"{len(rows)} distinct non-zero chunks, {total / 1e6:.1f} MB\n")
    print("| policy | stored MB | vs default | compress CPU s | CPU-s per GB of chunks | vs default |")
    print("|:--|--:|--:|--:|--:|--:|")
    base = None
    for name, choose in policies():
        size = cpu = 0
        for r in rows:
            s, t = stored(r, choose(r))
            size += s
            cpu += t
        base = base or (size, cpu)
        print(f"| {name} | {size / 1e6:.1f} | {size / base[0]:.3f}x | {cpu / 1e9:.2f} | {cpu / total:.2f} | {cpu / base[1]:.3f}x |")


if __name__ == "__main__":
    main()
