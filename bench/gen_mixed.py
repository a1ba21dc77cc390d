"""The "mixed" dataset profile of gen_dataset.py: harder than the default one.

Most of its bytes compress, and what dedupes does so at shifted offsets. By bytes:

  usr/  ~38%  real files from /usr (text, ELF binaries, already-compressed
              .gz/.xz/.png/... ), a seeded sample of a sorted walk of /usr
  vm/   ~44%  two disk images; the second is a clone of the first with a
              quarter of its regions replaced by new ones of other lengths,
              so everything after a replacement dedupes at a shifted offset.
              Regions: zeros, random data, concatenated system files,
              repeated templates (stamped copies of a block), text
  db/   ~19%  two database files of 8 KiB pages holding text records
              (2-3x compressible), each page with a header and free space

db/ takes whatever the other parts leave, so the total is exact.
"""

import os
import struct

from gen_dataset import KIB, MIB, log_uniform, random_bytes, usr_files

USR_SHARE = 0.38
VM_SHARE = 0.44
USR_ROOTS = ("/usr/bin", "/usr/lib", "/usr/share", "/usr/libexec", "/usr/sbin")
USR_MAX_FILE = 64 * MIB  # one huge library would make the sample lumpy
USR_SLACK = 16 * KIB
SECTOR = 4 * KIB
PAGE = 8 * KIB
# Region mix of the first image, by count; lengths are log-uniform.
VM_KINDS = (("zeros", 10), ("random", 25), ("system", 35), ("template", 10), ("text", 20))
REPLACED_SHARE = 0.25


def usr_listing():
    """(path, size) of the regular files under USR_ROOTS, sorted."""
    return [(path, size) for path, size in usr_files(USR_ROOTS) if 0 < size <= USR_MAX_FILE]


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def copy_usr_sample(dataset, budget, files):
    """Copies files in the (seeded) order given until the budget is used."""
    remaining = budget
    for source, size in files:
        if remaining < USR_SLACK:
            break
        if size > remaining:
            continue
        data = read_file(source)
        if data is None:
            continue
        dataset.write(os.path.join("usr", source.lstrip("/")), data)
        remaining -= len(data)


class SystemStream:
    """Contents of /usr files concatenated, for the images' "system" regions.

    Reads files lazily in the order given; regions take the next bytes, so an
    image holds each file once, as a real disk does (replacements in the clone
    take later files: an upgrade).
    """

    def __init__(self, files):
        self._files = iter(files)
        self._buffer = bytearray()

    def take(self, size):
        while len(self._buffer) < size:
            path, _ = next(self._files, (None, 0))
            if path is None:
                raise RuntimeError("/usr holds too little for the VM images at this size")
            data = read_file(path)
            if data:
                self._buffer += data
        region = bytes(self._buffer[:size])
        del self._buffer[:size]
        return region


class ImageRegions:
    """Makes the content of one image region."""

    def __init__(self, rng, text, system):
        self.rng, self.text, self.system = rng, text, system
        self.templates = []
        for _ in range(12):
            size = log_uniform(rng, 8 * KIB, 64 * KIB)
            half = text.text(rng, size // 2)
            self.templates.append(half + random_bytes(rng, size // 8) + bytes(size - len(half) - size // 8))

    def make(self, kind, length):
        rng = self.rng
        if kind == "zeros":
            return bytes(length)
        if kind == "random":
            return random_bytes(rng, length)
        if kind == "system":
            return self.system.take(length)
        if kind == "text":
            return self.text.text(rng, length)
        template = rng.choice(self.templates)
        copies, stamp = [], rng.getrandbits(32)
        for number in range(length // len(template) + 1):
            # Each copy: a header, a few hundred bytes of its own, the template.
            copies.append(struct.pack("<QQ", stamp, number))
            copies.append(rng.randbytes(496))
            copies.append(template[512:])
        return b"".join(copies)[:length]

    def region(self):
        kind = self.rng.choices([k for k, _ in VM_KINDS], weights=[w for _, w in VM_KINDS])[0]
        length = log_uniform(self.rng, 64 * KIB, 16 * MIB) // SECTOR * SECTOR
        return kind, length


def make_images(dataset, budget, rng, text, system_files):
    """Two images: the first generated, the second a clone with a quarter of
    its regions replaced (other kinds and lengths)."""
    if budget <= 0:
        return
    regions = ImageRegions(rng, text, SystemStream(system_files))
    first_size = budget // 2
    first = dataset.path("vm/base.img")
    layout = []  # (offset, length) in the first image
    with open(first, "wb") as image:
        written = 0
        while written < first_size:
            kind, length = regions.region()
            data = regions.make(kind, min(length, first_size - written))
            image.write(data)
            layout.append((written, len(data)))
            written += len(data)
    dataset.added(first_size)

    clone_size = budget - first_size
    replaced = set(rng.sample(range(len(layout)), max(1, round(len(layout) * REPLACED_SHARE))))
    with open(first, "rb") as source, open(dataset.path("vm/clone.img"), "wb") as image:
        written = 0
        for number, (offset, length) in enumerate(layout):
            if written >= clone_size:
                break
            if number in replaced:
                kind, new_length = regions.region()
                data = regions.make(kind, new_length)
            else:
                source.seek(offset)
                data = source.read(length)
            data = data[:clone_size - written]
            image.write(data)
            written += len(data)
        while written < clone_size:  # the replacements came out shorter
            kind, length = regions.region()
            data = regions.make(kind, min(length, clone_size - written))
            image.write(data)
            written += len(data)
    dataset.added(clone_size)


class Pages:
    """8 KiB database pages of delimited text records."""

    CITIES = [b"Lisbon", b"Oslo", b"Kyoto", b"Quito", b"Accra", b"Perth", b"Lima", b"Turin",
              b"Hanoi", b"Tunis", b"Boise", b"Cork", b"Davao", b"Omsk", b"Split", b"Zurich"]
    STATUSES = [b"open", b"closed", b"pending", b"shipped", b"returned"]

    def __init__(self, rng, text):
        self.rng = rng
        self.words = text.text(rng, 8 * MIB)  # comments are slices of this
        self.next_id = rng.randrange(1, 1 << 20)

    def record(self):
        rng = self.rng
        self.next_id += rng.randint(1, 3)
        start = rng.randrange(len(self.words) - 200)
        comment = self.words[start:start + rng.randint(20, 160)].replace(b"\n", b" ")
        return b"%d|%016x|%s|%s|%d.%02d|2026-%02d-%02d %02d:%02d:%02d|%s\x00" % (
            self.next_id, rng.getrandbits(64), rng.choice(self.CITIES), rng.choice(self.STATUSES),
            rng.randrange(100000), rng.randrange(100), rng.randint(1, 12), rng.randint(1, 28),
            rng.randrange(24), rng.randrange(60), rng.randrange(60), comment)

    def page(self, number):
        records, used = [], 24
        fill = PAGE * self.rng.uniform(0.85, 0.98)  # pages keep some free space
        while used < fill:
            record = self.record()
            if used + len(record) > PAGE:
                break
            records.append(record)
            used += len(record)
        body = b"".join(records)
        header = struct.pack("<QQHHI", number, self.rng.getrandbits(64), len(records), PAGE - used, 0)
        return header + body + bytes(PAGE - len(header) - len(body))


def make_databases(dataset, budget, rng, text):
    if budget <= 0:
        return
    pages = Pages(rng, text)
    sizes = [budget * 3 // 5 // PAGE * PAGE]
    sizes.append(budget - sizes[0])
    for name, size in zip(("db/orders.db", "db/customers.db"), sizes):
        with open(dataset.path(name), "wb") as db:
            for number in range(size // PAGE):
                db.write(pages.page(number))
            db.write(pages.page(size // PAGE)[:size % PAGE])
        dataset.added(size)


def make_mixed(dataset, total, stream, text, run_part):
    """Fills `dataset` with `total` bytes of the mixed profile; `stream(part)`
    gives one seeded Random per part, run_part(name, make, *args) records it."""
    listing = usr_listing()
    order = list(listing)
    stream("usr-order").shuffle(order)
    usr_budget = int(total * USR_SHARE)
    run_part("usr (copied from /usr)", copy_usr_sample, usr_budget, order)
    # The images' system regions use files the usr/ sample did not take.
    copied = set(os.path.join("/", os.path.relpath(p, os.path.join(dataset.root, "usr")))
                 for p in walk_files(os.path.join(dataset.root, "usr")))
    system_files = [entry for entry in order if entry[0] not in copied]
    run_part("vm images (base, clone)", make_images, int(total * VM_SHARE), stream("vm"), text, system_files)
    run_part("db (8 KiB pages)", make_databases, total - dataset.bytes, stream("db"), text)


def walk_files(root):
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            yield os.path.join(dirpath, name)
