"""Read ckcd-link's packet capture (``ckcd-link --capture FILE``; docs/ckcd-link.md, "Packet
capture") and measure each packet's sojourn in the queue from it.

The file is pcapng: one interface per (direction, event), named ``ab.enqueue``, ``ab.drop``,
``ab.mark``, ``ab.dequeue``, ``ab.lost``, ``ab.discard`` and the same for ``ba``; one record per
event, the frame's first bytes, with what the event knows as ``key=value`` words in its comment
(``reason=overflow``, ``sojourn_ns=5120334``, ``ce=1``). Stdlib only (struct): reading a capture
needs no new dependency.

    for rec in read_capture("run.pcapng"):
        print(rec.direction, rec.event, rec.t_ns, rec.reason)
    ab = sojourns(read_capture("run.pcapng"))["ab"]
    print(len(ab.packets), ab.packets[0].sojourn_ns)

The reader refuses, with CaptureError naming the byte offset, what a pcapng writer cannot have
written: a file that does not start with a Section Header Block, an unknown byte-order magic or
major version, a block whose total length is under 12, not a multiple of 4, past the end of the
file or not repeated at its end, an option or a packet's data running past its block, a packet of
an interface never described, and an interface that is not one of ckcd-link's. Blocks of other
types (statistics, name resolution) are skipped, as the format asks of a reader.
"""

from __future__ import annotations

import io
import os
import struct
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator, Optional, Union

DIRECTIONS = ("ab", "ba")
EVENTS = ("enqueue", "drop", "mark", "dequeue", "lost", "discard")

_SHB, _IDB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000006
_MAGIC = 0x1A2B3C4D
_OPT_COMMENT, _OPT_IF_NAME, _OPT_IF_TSRESOL = 1, 2, 9


class CaptureError(ValueError):
    """The file is not a capture this reader can trust; the message says where and why."""


@dataclass(frozen=True)
class Record:
    """One event of one frame."""
    direction: str  # "ab" or "ba"
    event: str      # one of EVENTS
    t_ns: int       # wall-clock time, ns since the epoch
    caplen: int     # bytes captured (the snap length at most)
    origlen: int    # the frame's length
    comment: str    # "" when the record has none
    data: bytes

    @property
    def words(self) -> dict[str, str]:
        """The comment's key=value words."""
        return dict(w.split("=", 1) for w in self.comment.split() if "=" in w)

    @property
    def reason(self) -> Optional[str]:
        """A drop's, mark's or discard's reason (the daemon's counter name), else None."""
        return self.words.get("reason")

    @property
    def sojourn_ns(self) -> Optional[int]:
        """How long the frame had waited in the queue: on a dequeue, and on a drop or mark of a
        frame that was queued (None on one that was arriving)."""
        value = self.words.get("sojourn_ns")
        return int(value) if value is not None else None


@dataclass(frozen=True)
class PacketSojourn:
    """A frame's time in the queue, from its enqueue and dequeue records."""
    direction: str
    enqueue_ns: int
    dequeue_ns: int
    origlen: int
    reported_ns: Optional[int]  # the sojourn the daemon wrote on the dequeue

    @property
    def sojourn_ns(self) -> int:
        return self.dequeue_ns - self.enqueue_ns


@dataclass(frozen=True)
class DirectionSojourns:
    """The sojourns of one direction's frames, and what could not be matched."""
    direction: str
    packets: tuple[PacketSojourn, ...]
    unmatched_dequeues: int  # no enqueue of the same bytes before (started mid-queue, or records not written)
    dropped_from_queue: int  # queued frames a drop took out (never dequeued)
    still_queued: int        # enqueued, and neither dequeued nor dropped when the capture ends

    def mean_ns(self) -> float:
        if not self.packets:
            raise ValueError(f"{self.direction}: no packet was dequeued")
        return sum(p.sojourn_ns for p in self.packets) / len(self.packets)


@dataclass(frozen=True)
class _Interface:
    direction: str
    event: str
    ticks_per_s: int


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def _read_exact(f: BinaryIO, n: int, offset: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) < n:
        raise CaptureError(f"byte {offset}: {what} truncated ({len(data)} of {n} bytes in the file)")
    return data


def _blocks(f: BinaryIO) -> Iterator[tuple[int, int, bytes, str]]:
    """(offset, type, body without the length words, byte order) of each block, framing checked."""
    offset, endian = 0, ""
    while True:
        head = f.read(8)
        if not head:
            return
        if len(head) < 8:
            raise CaptureError(f"byte {offset}: block header truncated ({len(head)} of 8 bytes)")
        prefix = b""
        if head[:4] == struct.pack("<I", _SHB):
            prefix = _read_exact(f, 4, offset + 8, "section header")
            endian = {struct.pack("<I", _MAGIC): "<", struct.pack(">I", _MAGIC): ">"}.get(prefix, "")
            if not endian:
                raise CaptureError(f"byte {offset}: byte-order magic {prefix.hex()} is neither order of 1a2b3c4d")
        elif not endian:
            raise CaptureError("not pcapng: the file does not start with a Section Header Block")
        btype, length = struct.unpack(endian + "II", head)
        if length < 12 or length % 4:
            raise CaptureError(f"byte {offset}: block length {length} is not a multiple of 4 of at least 12")
        body = prefix + _read_exact(f, length - 8 - len(prefix), offset + 8, f"block of {length} bytes")
        (trailing,) = struct.unpack(endian + "I", body[-4:])
        if trailing != length:
            raise CaptureError(f"byte {offset}: block length {length} but {trailing} at its end")
        yield offset, btype, body[:-4], endian
        offset += length


def _options(body: bytes, at: int, endian: str, where: str) -> dict[int, list[bytes]]:
    """The options from body[at:] by code; opt_endofopt or the body's end ends them."""
    found: dict[int, list[bytes]] = {}
    while at < len(body):
        if len(body) - at < 4:
            raise CaptureError(f"{where}: {len(body) - at} stray bytes after the options")
        code, length = struct.unpack_from(endian + "HH", body, at)
        if code == 0:
            break
        if at + 4 + length > len(body):
            raise CaptureError(f"{where}: option {code} of {length} bytes runs past its block")
        found.setdefault(code, []).append(body[at + 4:at + 4 + length])
        at += 4 + _pad4(length)
    return found


def _section(body: bytes, endian: str, offset: int) -> None:
    if len(body) < 16:
        raise CaptureError(f"byte {offset}: section header of {len(body) + 12} bytes, under 28")
    major, _minor = struct.unpack_from(endian + "HH", body, 4)
    if major != 1:
        raise CaptureError(f"byte {offset}: pcapng major version {major}, not 1")
    _options(body, 16, endian, f"byte {offset}")


def _interface(body: bytes, endian: str, offset: int, index: int) -> _Interface:
    where = f"byte {offset} (interface {index})"
    if len(body) < 8:
        raise CaptureError(f"{where}: interface description of {len(body) + 12} bytes, under 20")
    opts = _options(body, 8, endian, where)
    name = opts.get(_OPT_IF_NAME, [b""])[0].decode("utf-8", "replace")
    direction, _, event = name.partition(".")
    if direction not in DIRECTIONS or event not in EVENTS:
        raise CaptureError(f"{where}: interface named {name!r}, not a ckcd-link capture's (ab.enqueue, ...)")
    ticks = 10 ** 6  # the format's default: microseconds
    if _OPT_IF_TSRESOL in opts:
        res = opts[_OPT_IF_TSRESOL][0]
        if len(res) != 1:
            raise CaptureError(f"{where}: if_tsresol of {len(res)} bytes, not 1")
        ticks = 2 ** (res[0] & 0x7F) if res[0] & 0x80 else 10 ** res[0]
    return _Interface(direction, event, ticks)


def _packet(body: bytes, endian: str, offset: int, interfaces: list[_Interface]) -> Record:
    where = f"byte {offset}"
    if len(body) < 20:
        raise CaptureError(f"{where}: enhanced packet block of {len(body) + 12} bytes, under 32")
    ifid, ts_hi, ts_lo, caplen, origlen = struct.unpack_from(endian + "IIIII", body, 0)
    if ifid >= len(interfaces):
        raise CaptureError(f"{where}: a packet of interface {ifid}, but {len(interfaces)} are described")
    if 20 + caplen > len(body):
        raise CaptureError(f"{where}: {caplen} captured bytes run past the block")
    if caplen > origlen:
        raise CaptureError(f"{where}: {caplen} bytes captured of a {origlen}-byte frame")
    iface = interfaces[ifid]
    comments = _options(body, 20 + _pad4(caplen), endian, where).get(_OPT_COMMENT, [b""])
    try:
        comment = comments[0].decode("utf-8")
    except UnicodeDecodeError as e:
        raise CaptureError(f"{where}: comment is not UTF-8 ({e})") from None
    ticks = (ts_hi << 32) | ts_lo
    return Record(iface.direction, iface.event, ticks * 10 ** 9 // iface.ticks_per_s, caplen, origlen,
                  comment, bytes(body[20:20 + caplen]))


def _records(f: BinaryIO) -> Iterator[Record]:
    interfaces: list[_Interface] = []
    for offset, btype, body, endian in _blocks(f):
        if btype == _SHB:
            _section(body, endian, offset)
            interfaces = []  # a new section describes its interfaces anew
        elif btype == _IDB:
            interfaces.append(_interface(body, endian, offset, len(interfaces)))
        elif btype == _EPB:
            yield _packet(body, endian, offset, interfaces)


def read_capture(source: Union[str, os.PathLike, bytes]) -> Iterator[Record]:
    """The records of a capture file (a path, or its bytes), in the file's order: per direction
    the order the daemon made them in; the two directions' records interleave, not always in
    time order. Raises CaptureError at the first malformed block."""
    if isinstance(source, (bytes, bytearray)):
        yield from _records(io.BytesIO(source))
        return
    with open(source, "rb") as f:
        yield from _records(io.BufferedReader(f, buffer_size=1 << 20))


def _take_queued(pending: dict[bytes, deque], rec: Record) -> bool:
    """Takes a dropped queued frame out of pending: the one enqueued its sojourn before the drop,
    else the oldest of its bytes."""
    waiting = pending.get(rec.data)
    if not waiting:
        return False
    enqueued = rec.t_ns - (rec.sojourn_ns or 0)
    if enqueued in waiting:
        waiting.remove(enqueued)
    else:
        waiting.popleft()
    return True


def sojourns(records: Iterable[Record]) -> dict[str, DirectionSojourns]:
    """Each direction's per-packet sojourns: every dequeue matched to the first enqueue, not yet
    matched, of identical captured bytes (first in, first out: a flow's frames leave a queue in
    their order, and identical bytes are one flow's). A drop of a queued frame (one whose record
    has sojourn_ns) takes that frame out of the queue; marks, losses and discards do not touch it.
    The records must be in the file's order, as read_capture gives them."""
    pending: dict[str, dict[bytes, deque]] = {d: {} for d in DIRECTIONS}
    matched: dict[str, list[PacketSojourn]] = {d: [] for d in DIRECTIONS}
    unmatched = {d: 0 for d in DIRECTIONS}
    dropped = {d: 0 for d in DIRECTIONS}
    for rec in records:
        queue = pending[rec.direction]
        if rec.event == "enqueue":
            queue.setdefault(rec.data, deque()).append(rec.t_ns)
        elif rec.event == "dequeue":
            waiting = queue.get(rec.data)
            if waiting:
                matched[rec.direction].append(PacketSojourn(rec.direction, waiting.popleft(), rec.t_ns,
                                                            rec.origlen, rec.sojourn_ns))
            else:
                unmatched[rec.direction] += 1
        elif rec.event == "drop" and rec.sojourn_ns is not None:
            dropped[rec.direction] += _take_queued(queue, rec)
    return {d: DirectionSojourns(d, tuple(matched[d]), unmatched[d], dropped[d],
                                 sum(len(q) for q in pending[d].values()))
            for d in DIRECTIONS}
