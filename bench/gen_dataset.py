#!/usr/bin/env python3
"""Generate a deterministic backup-benchmark dataset.

The same --profile, --seed and --size-gib give a byte-identical tree (the /usr
part is identical only on machines with the same /usr contents). Two profiles:
"mixed" (gen_mixed.py: most bytes compressible, VM-image clones that dedupe at
shifted offsets, database pages, real system files) and the kinder default,
"kind", whose mix, by bytes, is:

  sys/    ~30%  real files copied from /usr/share and /usr/lib (sorted walk)
  vm/     ~40%  a few "VM images" (100-500 MiB at full size): zero runs,
                blocks repeated within and across images, text, random data
  media/  ~20%  incompressible files of mixed sizes
  docs/   ~10%  many small text files (1-64 KiB) in nested directories

docs/ takes whatever the other parts leave, so the total is exact.
"""

import argparse
import math
import os
import random
import shutil
import stat
import sys
import time

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

USR_ROOTS = ("/usr/share", "/usr/lib")
# Near the end of the /usr budget only tiny files still fit; stop instead of
# walking all of /usr for them.
USR_SLACK = 64 * KIB
# random.Random.randbytes() overflows above 256 MiB per call.
RANDOM_PIECE = 4 * MIB
VM_ALIGN = 4 * KIB  # disk images change in whole sectors/pages


def log_uniform(rng, low, high):
    """An integer in [low, high], uniform on a log scale (many small, few large)."""
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_bytes(rng, size):
    return b"".join(rng.randbytes(min(RANDOM_PIECE, size - done))
                    for done in range(0, size, RANDOM_PIECE))


class TextGenerator:
    """Prose-like text from a pseudo-word vocabulary with Zipf frequencies.

    Generating word by word in Python is too slow for hundreds of MiB, so a
    table of 65536 (word + separator) entries is drawn once with Zipf weights
    and indexed by random 16-bit numbers: one C-level join per chunk.
    """

    SYLLABLES = ("ka", "lo", "mi", "re", "su", "ta", "ne", "vo", "di", "ra",
                 "pe", "zu", "an", "el", "or", "is", "un", "ba", "co", "fi")
    SEPARATORS = ((b" ", 85), (b", ", 4), (b". ", 5), (b".\n", 4), (b"\n\n", 2))

    def __init__(self, rng):
        vocabulary = []
        for _ in range(4000):
            syllables = rng.choices(self.SYLLABLES, k=rng.randint(1, 4))
            vocabulary.append("".join(syllables).encode())
        zipf = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
        words = rng.choices(vocabulary, weights=zipf, k=65536)
        separators = rng.choices([s for s, _ in self.SEPARATORS],
                                 weights=[w for _, w in self.SEPARATORS], k=65536)
        self._table = [w + s for w, s in zip(words, separators)]

    def word(self, rng):
        return rng.choice(self._table).split()[0].rstrip(b".,").decode()

    def text(self, rng, size):
        pieces, produced = [], 0
        while produced < size:
            # ~7 bytes per entry on average; ask for a little more than needed.
            entries = min(1 << 20, (size - produced) // 6 + 16)
            indices = memoryview(rng.randbytes(2 * entries)).cast("H")
            piece = b"".join(map(self._table.__getitem__, indices))
            pieces.append(piece)
            produced += len(piece)
        return b"".join(pieces)[:size]


class Dataset:
    """Writes files under a root and keeps count of what it wrote."""

    def __init__(self, root):
        self.root = root
        self.files = 0
        self.bytes = 0

    def path(self, relative):
        full = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        return full

    def write(self, relative, data):
        with open(self.path(relative), "wb") as out:
            out.write(data)
        self.added(len(data))

    def added(self, size):
        self.files += 1
        self.bytes += size


def usr_files(roots=USR_ROOTS):
    """Regular files under `roots` in a deterministic (sorted) order."""
    for top in roots:
        for dirpath, dirnames, filenames in os.walk(top):  # unreadable dirs are skipped
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    yield path, info.st_size


def copy_usr(dataset, budget):
    remaining = budget
    for source, size in usr_files():
        if remaining < USR_SLACK:
            break
        if size > remaining:
            continue
        destination = dataset.path(os.path.join("sys", source.lstrip("/")))
        try:
            shutil.copyfile(source, destination)
        except OSError:  # unreadable or vanished: skip it, keep walking
            if os.path.exists(destination):
                os.remove(destination)
            continue
        dataset.added(size)
        remaining -= size


def make_vm_images(dataset, budget, rng, text):
    """A few disk-image-like files sharing a pool of repeated blocks."""
    if budget <= 0:
        return
    count = max(2, round(budget / (300 * MIB)))
    weights = [rng.uniform(2, 4) for _ in range(count)]  # ~160-410 MiB at 2 GiB
    sizes = [int(budget * w / sum(weights)) for w in weights]
    sizes[-1] += budget - sum(sizes)

    pool = []
    for _ in range(8):
        size = log_uniform(rng, 64 * KIB, 4 * MIB) // VM_ALIGN * VM_ALIGN
        pool.append(text.text(rng, size) if rng.random() < 0.4 else random_bytes(rng, size))

    for number, size in enumerate(sizes, 1):
        with open(dataset.path(f"vm/disk-{number:02d}.img"), "wb") as image:
            written = 0
            while written < size:
                kind = rng.choices(("zeros", "repeat", "text", "random"),
                                   weights=(25, 20, 20, 35))[0]
                if kind == "repeat":
                    region = rng.choice(pool)
                else:
                    length = log_uniform(rng, 64 * KIB, 16 * MIB) // VM_ALIGN * VM_ALIGN
                    if kind == "zeros":
                        region = bytes(length)
                    elif kind == "text":
                        region = text.text(rng, length)
                    else:
                        region = random_bytes(rng, length)
                region = region[:size - written]
                image.write(region)
                written += len(region)
        dataset.added(size)


def make_media(dataset, budget, rng):
    remaining, number = budget, 0
    while remaining > 0:
        number += 1
        size = min(remaining, log_uniform(rng, 64 * KIB, 64 * MIB))
        kind = "photos/IMG_{:05d}.jpg" if size < 8 * MIB else "video/clip_{:05d}.mp4"
        dataset.write(os.path.join("media", kind.format(number)), random_bytes(rng, size))
        remaining -= size


def make_docs(dataset, budget, rng, text):
    """Small text files spread over a random directory tree up to 5 levels deep."""
    directories = [("docs", 0)]
    remaining, number = budget, 0
    while remaining > 0:
        number += 1
        if number % 20 == 1:  # a new directory every 20 files
            parent, depth = rng.choice([d for d in directories if d[1] < 5])
            name = f"{text.word(rng)}-{number}"
            directories.append((os.path.join(parent, name), depth + 1))
        directory, _ = rng.choice(directories)
        extension = rng.choice(("txt", "md", "log", "csv", "conf"))
        size = min(remaining, log_uniform(rng, 1 * KIB, 64 * KIB))
        name = f"note_{number:06d}.{extension}"
        dataset.write(os.path.join(directory, name), text.text(rng, size))
        remaining -= size


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", help="directory to create (must not exist or be empty)")
    parser.add_argument("--size-gib", type=float, default=2.0, help="total size (default 2.0)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--profile", choices=("kind", "mixed"), default="kind",
                        help="what the data looks like (default kind; see above)")
    args = parser.parse_args()

    if args.size_gib <= 0:
        parser.error("--size-gib must be positive")
    if os.path.exists(args.out_dir) and os.listdir(args.out_dir):
        parser.error(f"{args.out_dir} exists and is not empty; "
                     "the generator only writes into a fresh directory")
    os.makedirs(args.out_dir, exist_ok=True)

    started = time.monotonic()
    total = int(args.size_gib * GIB)
    dataset = Dataset(args.out_dir)
    text = TextGenerator(random.Random(f"vocabulary:{args.seed}"))
    # One random stream per part, so changing one part leaves the others identical.
    def stream(part):
        return random.Random(f"{part}:{args.seed}")

    parts = []
    def run_part(name, make, *make_args):
        files, size = dataset.files, dataset.bytes
        make(dataset, *make_args)
        parts.append((name, dataset.files - files, dataset.bytes - size))

    if args.profile == "mixed":
        from gen_mixed import make_mixed  # it imports this module's helpers
        make_mixed(dataset, total, stream, text, run_part)
    else:
        run_part("sys (copied from /usr)", copy_usr, int(total * 0.30))
        run_part("vm images", make_vm_images, int(total * 0.40), stream("vm"), text)
        run_part("media (random)", make_media, int(total * 0.20), stream("media"))
        run_part("docs (small text)", make_docs, total - dataset.bytes, stream("docs"), text)

    seconds = time.monotonic() - started
    for name, files, size in parts:
        share = 100.0 * size / dataset.bytes if dataset.bytes else 0.0
        print(f"  {name:24s} {files:7d} files {size / MIB:10.1f} MiB {share:5.1f}%")
    print(f"dataset {args.out_dir}: {dataset.files} files, {dataset.bytes} bytes "
          f"({dataset.bytes / GIB:.3f} GiB), profile {args.profile}, seed {args.seed}, "
          f"{seconds:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
