#!/usr/bin/env python3
"""Write N bytes of deterministic, partly compressible, non-repeating data to stdout.

The stream is a sequence of 16 KiB pieces. Each piece starts with a header line naming
the seed and the piece's index, so no two pieces are equal and no chunk of a
content-defined chunker (whose chunks are larger than a piece) repeats: the whole
stream is new data to a deduplicating backup. The rest of a piece is, chosen by a seeded
generator, a slice of a 64 MiB random pool (60%: incompressible), a slice of a text
pool (30%: compresses a few times) or zeros (10%). Slices start at random offsets, so
the stream costs little more than copying memory (more than 1 GB/s on one core) instead
of generating random bytes (about 0.7 GB/s).

  stream_gen.py --bytes 10737418240 --seed 1 | keel backup --stdin ...
  stream_gen.py --bytes 1G --sha256 digest.txt >/dev/null   # also record the stream's SHA-256

Same --bytes and --seed give the same bytes.
"""

import argparse
import hashlib
import random
import sys

PIECE = 16 * 1024
POOL = 64 * 1024 * 1024
TEXT_POOL = 4 * 1024 * 1024
WRITE = 4 * 1024 * 1024
WORDS = ("keel backup restore snapshot chunk pack index catalog target bucket object "
         "upload download multipart region endpoint credential signature error retry "
         "the a of to and in is it that for on with as was at by from this be are").split()
SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    """'1048576', '512M', '10G' (binary units) -> bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1] if text and text[-1] in "KMGT" else ""
    try:
        value = float(text[:len(text) - len(unit)]) * SUFFIXES[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1073741824, 512M, 10G)")
    if value < 0:
        raise argparse.ArgumentTypeError("size must not be negative")
    return int(value)


def text_pool(rng):
    """Log-like lines of a small vocabulary: zstd shrinks it about 3-4x, like real text."""
    lines, size = [], 0
    while size < TEXT_POOL:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16)))
        line = f"{rng.randint(0, 10**9):09d} {words} id={rng.getrandbits(32):08x}\n".encode()
        lines.append(line)
        size += len(line)
    return b"".join(lines)[:TEXT_POOL]


def pieces(seed):
    """The endless stream, piece by piece."""
    rng = random.Random(seed)
    random_pool = rng.randbytes(POOL)
    text = text_pool(rng)
    zeros = bytes(PIECE)
    index = 0
    while True:
        header = b"%08x %016x\n" % (seed & 0xFFFFFFFF, index)
        body = PIECE - len(header)
        kind = rng.random()
        if kind < 0.6:
            offset = rng.randrange(POOL - body)
            yield header + random_pool[offset:offset + body]
        elif kind < 0.9:
            offset = rng.randrange(TEXT_POOL - body)
            yield header + text[offset:offset + body]
        else:
            yield header + zeros[:body]
        index += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=parse_size, required=True,
                        help="how many bytes to write (K, M, G, T: powers of 1024)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sha256", metavar="FILE",
                        help="also write the stream's SHA-256 (hex) to FILE")
    args = parser.parse_args()

    digest = hashlib.sha256() if args.sha256 else None
    out = sys.stdout.buffer
    left = args.bytes
    batch = []
    batch_bytes = 0
    try:
        for piece in pieces(args.seed):
            if left == 0:
                break
            piece = piece[:left]
            batch.append(piece)
            batch_bytes += len(piece)
            left -= len(piece)
            if batch_bytes >= WRITE or left == 0:
                block = b"".join(batch)
                if digest:
                    digest.update(block)
                out.write(block)
                batch, batch_bytes = [], 0
        out.flush()
    except BrokenPipeError:
        print(f"stream_gen.py: the reader closed the pipe with {left} bytes still to write",
              file=sys.stderr)
        return 1
    if digest:
        with open(args.sha256, "w") as f:
            f.write(digest.hexdigest() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
