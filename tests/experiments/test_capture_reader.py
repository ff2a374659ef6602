"""The reader of ckcd-link's packet capture (experiments/analysis/capture.py) on pcapng files built
here byte by byte from the format's layout (draft-ietf-opsawg-pcapng), independently of the
daemon's writer: records and their fields, both byte orders, time resolutions, the per-packet
sojourn matching, and the refusal of every kind of malformed file. The reader on a capture the
daemon wrote, against tshark: tests/link/test_capture.py."""

from __future__ import annotations

import struct

import pytest

from experiments.analysis.capture import EVENTS, CaptureError, read_capture, sojourns

NAMES = [f"{d}.{e}" for d in ("ab", "ba") for e in EVENTS]  # interface id = position


def block(btype: int, body: bytes, endian: str = "<", length: int | None = None,
          trailing: int | None = None) -> bytes:
    """A block of the given body (padded by the caller); length and trailing override the two
    copies of its total length, to build malformed ones."""
    total = 12 + len(body)
    return (struct.pack(endian + "II", btype, total if length is None else length) + body
            + struct.pack(endian + "I", total if trailing is None else trailing))


def option(code: int, value: bytes, endian: str = "<") -> bytes:
    return struct.pack(endian + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def shb(endian: str = "<", magic: int = 0x1A2B3C4D, major: int = 1) -> bytes:
    body = struct.pack(endian + "IHHq", magic, major, 0, -1) + option(4, b"test", endian) + bytes(4)
    return block(0x0A0D0D0A, body, endian)


def idb(name: str, endian: str = "<", tsresol: int | None = 9) -> bytes:
    opts = option(2, name.encode(), endian)
    if tsresol is not None:
        opts += option(9, bytes([tsresol]), endian)
    return block(1, struct.pack(endian + "HHI", 1, 0, 128) + opts + bytes(4), endian)


def epb(ifid: int, t: int, data: bytes, origlen: int | None = None, comment: str = "",
        endian: str = "<") -> bytes:
    body = struct.pack(endian + "IIIII", ifid, t >> 32, t & 0xFFFFFFFF, len(data),
                       len(data) if origlen is None else origlen)
    body += data + bytes(-len(data) % 4)
    if comment:
        body += option(1, comment.encode(), endian) + bytes(4)
    return block(6, body, endian)


def header(endian: str = "<", tsresol: int | None = 9) -> bytes:
    return shb(endian) + b"".join(idb(n, endian, tsresol) for n in NAMES)


def ifid(name: str) -> int:
    return NAMES.index(name)


FRAME = bytes(range(14)) + b"\x45" + bytes(45)  # 60 bytes: not a multiple of 4 after padding rules


def test_records_come_back_as_written():
    """Rule: each packet block is one Record of its interface's direction and event, with its
    time in ns, captured and original lengths, comment (and its words) and captured bytes."""
    t = 1_795_800_000_123_456_789
    data = header() + epb(ifid("ab.enqueue"), t, FRAME[:61 - 14], origlen=1514) \
        + epb(ifid("ba.drop"), t + 5, FRAME, comment="reason=overflow") \
        + epb(ifid("ab.dequeue"), t + 1000, FRAME[:47], origlen=1514, comment="sojourn_ns=1000 ce=1")
    recs = list(read_capture(data))
    assert [(r.direction, r.event) for r in recs] == [("ab", "enqueue"), ("ba", "drop"), ("ab", "dequeue")]
    assert (recs[0].t_ns, recs[0].caplen, recs[0].origlen, recs[0].comment) == (t, 47, 1514, "")
    assert recs[0].data == FRAME[:47] and recs[0].reason is None and recs[0].sojourn_ns is None
    assert recs[1].reason == "overflow" and recs[1].sojourn_ns is None and recs[1].data == FRAME
    assert recs[2].sojourn_ns == 1000 and recs[2].words == {"sojourn_ns": "1000", "ce": "1"}


def test_a_big_endian_file_reads_the_same(tmp_path):
    """Rule: the byte-order magic decides how every field is read: the same capture written
    big-endian gives the same records, read from a path as from bytes."""
    t = 1_795_800_000_000_000_001
    little = header("<") + epb(ifid("ba.lost"), t, FRAME, origlen=100, endian="<")
    big = header(">") + epb(ifid("ba.lost"), t, FRAME, origlen=100, endian=">")
    path = tmp_path / "big.pcapng"
    path.write_bytes(big)
    assert list(read_capture(big)) == list(read_capture(little)) == list(read_capture(str(path)))
    assert list(read_capture(big))[0].t_ns == t


@pytest.mark.parametrize("tsresol,ticks,want_ns", [(9, 1234, 1234), (6, 1234, 1_234_000), (None, 7, 7_000),
                                                   (0x80 | 10, 2048, 2_000_000_000)])
def test_times_follow_the_interface_resolution(tsresol, ticks, want_ns):
    """Rule: a time is in units of its interface's if_tsresol (10^-n, or 2^-n with the high bit
    set; microseconds when absent), returned in ns."""
    rec = next(read_capture(header(tsresol=tsresol) + epb(0, ticks, FRAME)))
    assert rec.t_ns == want_ns


def test_a_header_only_capture_has_no_records():
    """Rule: a capture no frame passed through is valid and empty: no record, no sojourn."""
    assert list(read_capture(header())) == []
    result = sojourns(read_capture(header()))
    assert [(r.packets, r.unmatched_dequeues, r.still_queued) for r in result.values()] == [((), 0, 0)] * 2


def frame(n: int) -> bytes:
    return bytes([n]) * 60


def test_each_dequeue_is_matched_to_its_enqueue_first_in_first_out():
    """Rule: a dequeue takes the earliest unmatched enqueue of identical captured bytes, in its own
    direction; a dequeue with none is counted unmatched, an enqueue never dequeued still queued;
    a drop of a queued frame (sojourn_ns given) takes exactly that frame out (the one enqueued its
    sojourn before), a drop of an arriving one (no sojourn_ns) takes none."""
    x, y, z = frame(1), frame(2), frame(3)
    recs = [
        epb(ifid("ab.enqueue"), 10, x), epb(ifid("ab.enqueue"), 15, y), epb(ifid("ab.enqueue"), 20, x),
        epb(ifid("ba.enqueue"), 21, z),
        epb(ifid("ab.dequeue"), 30, x, comment="sojourn_ns=20"),
        epb(ifid("ab.dequeue"), 35, y, comment="sojourn_ns=20"),
        epb(ifid("ab.dequeue"), 40, x, comment="sojourn_ns=20"),
        epb(ifid("ab.dequeue"), 41, z, comment="sojourn_ns=0"),       # z was enqueued in ba
        epb(ifid("ab.enqueue"), 50, x), epb(ifid("ab.enqueue"), 60, x),
        epb(ifid("ab.drop"), 60, x, comment="reason=overflow"),       # an arriving one: nothing queued leaves
        epb(ifid("ab.drop"), 70, x, comment="reason=choke_match sojourn_ns=10"),  # the one of t=60
        epb(ifid("ab.mark"), 75, x, comment="reason=early sojourn_ns=25"),
        epb(ifid("ab.dequeue"), 80, x, comment="sojourn_ns=30"),
    ]
    result = sojourns(read_capture(header() + b"".join(recs)))
    ab, ba = result["ab"], result["ba"]
    assert [(p.enqueue_ns, p.dequeue_ns) for p in ab.packets] == [(10, 30), (15, 35), (20, 40), (50, 80)]
    assert all(p.sojourn_ns == p.reported_ns for p in ab.packets)
    assert (ab.unmatched_dequeues, ab.dropped_from_queue, ab.still_queued) == (1, 1, 0)
    assert (ba.packets, ba.still_queued) == ((), 1)
    assert ab.mean_ns() == pytest.approx((20 + 20 + 20 + 30) / 4)


def cut(data: bytes, n: int) -> bytes:
    return data[:n]


GOOD = header() + epb(0, 1, FRAME)
MALFORMED = [
    ("truncated block", cut(GOOD, len(GOOD) - 6), "truncated"),
    ("truncated block header", cut(GOOD, len(header()) + 5), "truncated"),
    ("length not a multiple of 4", header() + block(6, bytes(24), length=37), "multiple of 4"),
    ("length under 12", header() + struct.pack("<II", 6, 8), "multiple of 4 of at least 12"),
    ("trailing length differs", header() + block(6, struct.pack("<IIIII", 0, 0, 1, 0, 0), trailing=40),
     "at its end"),
    ("wrong byte-order magic", shb(magic=0x4D3C2B1B), "byte-order magic"),
    ("major version 2", shb(major=2), "major version 2"),
    ("not starting with a section header", idb("ab.enqueue"), "Section Header Block"),
    ("packet before any interface", shb() + epb(0, 1, FRAME), "0 are described"),
    ("packet of an undescribed interface", header() + epb(12, 1, FRAME), "interface 12"),
    ("captured bytes past the block", header() + block(6, struct.pack("<IIIII", 0, 0, 1, 200, 200) + bytes(8)),
     "run past the block"),
    ("captured more than the frame", header() + epb(0, 1, FRAME, origlen=10), "of a 10-byte frame"),
    ("option past its block", header() + block(6, struct.pack("<IIIII", 0, 0, 1, 0, 0) + struct.pack("<HH", 1, 40)),
     "runs past its block"),
    ("an interface not ckcd-link's", shb() + idb("eth0"), "not a ckcd-link capture"),
    ("if_tsresol of two bytes", shb() + block(1, struct.pack("<HHI", 1, 0, 128) + option(2, b"ab.drop")
                                                + option(9, b"\x09\x00") + bytes(4)), "if_tsresol"),
]


@pytest.mark.parametrize("data,message", [(d, m) for _, d, m in MALFORMED], ids=[n for n, _, _ in MALFORMED])
def test_malformed_files_are_refused_naming_why(data, message):
    """Rule: a file a pcapng writer cannot have written raises CaptureError (a ValueError) saying
    what is wrong, rather than yielding records read from the wrong bytes."""
    with pytest.raises(CaptureError, match=message):
        list(read_capture(data))


def test_blocks_of_other_types_are_skipped():
    """Rule: a well-formed block of a type the reader does not use (here an Interface Statistics
    Block, type 5) is skipped: the records around it are read."""
    data = header() + epb(0, 1, FRAME) + block(5, bytes(12)) + epb(1, 2, FRAME, comment="reason=early")
    assert [(r.event, r.t_ns) for r in read_capture(data)] == [("enqueue", 1), ("drop", 2)]
