"""q_ckcd.so, tc's plugin for sch_ckcd, on the host (no VM): how it parses options and what it sends.

The plugin is built alone (`make -C datapath/kernel plugin`, into a private build directory so a
concurrent module build is not disturbed) and loaded by the host's own tc through TC_LIB_DIR:
`tc qdisc add dev lo root ckcd OPTIONS`. tc runs the plugin's parser before anything reaches the
kernel, so a refused option exits 1 with the plugin's message, and an accepted one reaches a kernel
without ckcd, which answers "Specified qdisc kind is unknown" (exit 2) and changes nothing (lo keeps
its qdisc; checked after every accepted run). What the plugin sent is read from the request itself:
tc runs under `strace -e trace=sendmsg -e write=all`, whose hex dump of the RTM_NEWQDISC message is
decoded down to the TCA_OPTIONS nest (ckcd_nl.h: TCA_CKCD_SPEC, TCA_CKCD_DISC, TCA_CKCD_PARAMS).
The printer is fed a crafted dump through `tc monitor file` (tc reads netlink messages from a file).

CKCD_TC_PLUGIN_DIR=<dir with q_ckcd.so> runs the same tests against another build of the plugin.
"""

import glob
import os
import re
import struct
import subprocess

import pytest

from tests.conftest import REPO
from tests.kernel import lab

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

TC = "/usr/sbin/tc"
STRACE = "/usr/bin/strace"
KDIR = os.path.join(REPO, "datapath", "kernel")
RTM_NEWQDISC = 36
TCA_KIND, TCA_OPTIONS = 1, 2
SPEC, DISC, PARAMS = 1, 2, 3  # TCA_CKCD_* in ckcd_nl.h
SPEC_LEN = 4096  # TCA_CKCD_SPEC_LEN, NUL included
U64_MAX = 2**64 - 1


def _sch_ckcd_reachable() -> bool:
    """True when this kernel has or could autoload sch_ckcd: then `add dev lo` would really add it."""
    release = os.uname().release
    return os.path.exists("/sys/module/sch_ckcd") or bool(
        glob.glob(f"/lib/modules/{release}/**/sch_ckcd.ko*", recursive=True))


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    if not os.access(TC, os.X_OK):
        pytest.fail(f"{TC} missing: iproute2 is part of `make setup`")
    if _sch_ckcd_reachable():
        pytest.skip("this kernel has sch_ckcd: `tc qdisc add dev lo` would install it (the VM test covers it)")
    override = os.environ.get("CKCD_TC_PLUGIN_DIR")
    if override:
        return override
    try:
        src = lab.ensure_iproute2_src()
    except lab.LabUnavailable as e:
        pytest.fail(f"iproute2 source for the plugin: {e}")
    build = str(tmp_path_factory.mktemp("q_ckcd") / "build")
    res = subprocess.run(["make", "-s", "-C", KDIR, "plugin", f"IPROUTE2_SRC={src}", f"BUILD={build}"],
                         text=True, capture_output=True)
    assert res.returncode == 0, f"make plugin failed:\n{res.stdout}{res.stderr}"
    return build


@pytest.fixture(scope="module")
def lo_before():
    return subprocess.run([TC, "qdisc", "show", "dev", "lo"], text=True, capture_output=True).stdout


def _hexdump_messages(trace: str) -> list[bytes]:
    """The bytes of each sendmsg in strace's `-e write=all` dump (" | 00000  48 00 ...  ascii |")."""
    msgs: list[bytes] = []
    for line in trace.splitlines():
        if line.startswith("sendmsg("):
            msgs.append(b"")
        elif msgs and re.match(r"^ \| [0-9a-f]{5}  ", line):
            msgs[-1] += bytes.fromhex("".join(re.findall(r"[0-9a-f]{2}", line[10:58])))
    return msgs


def _attrs(data: bytes) -> list[tuple[int, bytes]]:
    out, off = [], 0
    while off + 4 <= len(data):
        length, typ = struct.unpack_from("=HH", data, off)
        assert 4 <= length <= len(data) - off, f"malformed attribute at {off}"
        out.append((typ & 0x3FFF, data[off + 4:off + length]))
        off += (length + 3) & ~3
    return out


def _options(msg: bytes) -> dict[int, str] | None:
    """The TCA_OPTIONS nest of one RTM_NEWQDISC request: {attribute: text}, None without a nest."""
    nlmsg_len, nlmsg_type = struct.unpack_from("=IH", msg)
    assert nlmsg_type == RTM_NEWQDISC and nlmsg_len == len(msg)
    attrs = _attrs(msg[16 + 20:])  # nlmsghdr, tcmsg
    assert (TCA_KIND, b"ckcd\0") in attrs
    nests = [data for typ, data in attrs if typ == TCA_OPTIONS]
    if not nests:
        return None
    out = {}
    for typ, data in _attrs(nests[0]):
        assert typ not in out, f"attribute {typ} twice"
        assert data.endswith(b"\0") and b"\0" not in data[:-1], f"attribute {typ} is not one NUL-terminated string"
        out[typ] = data[:-1].decode()
    return out


class Run:
    def __init__(self, rc: int, err: str, sent: dict[int, str] | None):
        self.rc, self.err, self.sent = rc, err, sent


@pytest.fixture(scope="module")
def tc(plugin_dir, lo_before, tmp_path_factory):
    if not os.access(STRACE, os.X_OK):
        pytest.fail(f"{STRACE} missing: the tests read tc's request through strace (apt-get install strace)")
    trace = str(tmp_path_factory.mktemp("strace") / "trace")

    def run(*opts: str) -> Run:
        res = subprocess.run([STRACE, "-o", trace, "-e", "trace=sendmsg", "-e", "write=all",
                              TC, "qdisc", "add", "dev", "lo", "root", "ckcd", *opts],
                             text=True, capture_output=True, env={**os.environ, "TC_LIB_DIR": plugin_dir})
        with open(trace) as f:
            msgs = [m for m in _hexdump_messages(f.read()) if struct.unpack_from("=H", m, 4)[0] == RTM_NEWQDISC]
        if res.returncode == 1:  # refused by the plugin: nothing reached the kernel
            assert not msgs, res.stderr
            return Run(1, res.stderr, None)
        assert res.returncode == 2 and "Specified qdisc kind is unknown" in res.stderr, (res.returncode, res.stderr)
        assert len(msgs) == 1
        now = subprocess.run([TC, "qdisc", "show", "dev", "lo"], text=True, capture_output=True).stdout
        assert now == lo_before, "lo's qdisc changed"
        return Run(2, res.stderr, _options(msgs[0]))

    return run


def accepted(run: Run) -> dict[int, str]:
    assert run.rc == 2, f"refused by the plugin: {run.err}"
    return run.sent


def refused(run: Run) -> str:
    assert run.rc == 1, f"accepted, sent {run.sent}"
    return run.err


# ---- numbers: exact or refused --------------------------------------------------------------

def test_rate_beyond_64_bits_is_refused(tc):
    """A value whose integer part does not fit 64 bits is refused naming the option (it used to wrap:
    18446744073709651616bit became rate_bps=100000)."""
    err = refused(tc("rate", "18446744073709651616bit"))
    assert 'ckcd: option "rate_bps": "18446744073709651616bit" is too large' in err


def test_rate_beyond_64_bits_after_unit_conversion_is_refused(tc):
    """The 64-bit check applies after the unit: 2306000000gbps is 18448000000000000000 bit/s > 2^64 - 1,
    refused; 2305843009gbps (18446744072000000000) fits and is sent exactly."""
    assert "is too large" in refused(tc("rate", "2306000000gbps"))
    assert accepted(tc("rate", "2305843009gbps")) == {PARAMS: "rate_bps=18446744072000000000"}


def test_rate_units_are_converted_exactly(tc):
    """Rate units convert exactly: 10gbps is 80000000000 bit/s, 1.5kbit 1500, 0.125bps 1 bit/s."""
    assert accepted(tc("rate", "10gbps")) == {PARAMS: "rate_bps=80000000000"}
    assert accepted(tc("rate", "1.5kbit")) == {PARAMS: "rate_bps=1500"}
    assert accepted(tc("rate", "0.125bps")) == {PARAMS: "rate_bps=1"}


def test_u64_max_is_sent_exactly(tc):
    """The largest 64-bit value fits and is sent digit for digit (its range is the kernel's to check)."""
    assert accepted(tc("rate", f"{U64_MAX}bit")) == {PARAMS: f"rate_bps={U64_MAX}"}


def test_time_fractions_are_exact(tc):
    """Time values convert to the parameter's ms exactly: 1.5ms and 1500us are d_ms=1.5, 100us 0.1,
    trailing zeros beyond the parameter's decimals are no precision (0.0020000000000 -> 0.002)."""
    assert accepted(tc("d", "1.5ms")) == {PARAMS: "d_ms=1.5"}
    assert accepted(tc("d", "1500us")) == {PARAMS: "d_ms=1.5"}
    assert accepted(tc("d", "100us")) == {PARAMS: "d_ms=0.1"}
    assert accepted(tc("delta", "2s")) == {PARAMS: "delta_ms=2000"}
    assert accepted(tc("omega", "0.0020000000000")) == {PARAMS: "omega=0.002"}


def test_more_decimals_than_the_parameter_keeps_are_refused(tc):
    """Fraction digits beyond the parameter's decimals after conversion are refused, not rounded (the
    old plugin sent 0.0000000001s as d_ms=0 and dropped digits past the ninth)."""
    err = refused(tc("d", "0.0000000001s"))
    assert 'ckcd: option "d_ms": "0.0000000001s" has more decimal places than d_ms keeps' in err
    assert 'option "d_ms"' in refused(tc("d", "1.0001ms"))  # 3 decimals of ms
    assert 'option "omega"' in refused(tc("omega", "0.0000001"))  # 6 decimals
    assert 'option "rate_bps"' in refused(tc("rate", "1.0001kbit"))  # whole bits
    assert "more decimal places" in refused(tc("d", "0." + "0" * 50 + "1ms"))


def test_not_a_number_keeps_its_message(tc):
    """A malformed number or a unit the parameter does not take: "is not a number of <unit>"."""
    assert 'ckcd: option "limit": "5ms" is not a number of packets' in refused(tc("limit", "5ms"))
    assert 'option "rate_bps": "1e3" is not a number of bit/s' in refused(tc("rate", "1e3"))


def test_negative_values_pass_to_the_kernel(tc):
    """A sign is representable, so it is sent (bands' penalized takes -1); the range is the kernel's."""
    assert accepted(tc("disc", "bands", "penalized", "-1")) == {DISC: "bands", PARAMS: "penalized=-1"}


# ---- text values and the length of what is sent ---------------------------------------------

def test_long_text_value_is_sent_whole(tc):
    """A text value that fits TCA_CKCD_SPEC_LEN is sent whole (it used to be cut to 47 bytes)."""
    value = ",".join(["46:1"] * 600)  # 2999 bytes
    assert accepted(tc("disc", "bands", "map", value)) == {DISC: "bands", PARAMS: f"map={value}"}


def test_text_value_too_long_is_refused(tc):
    """A text value that cannot fit TCA_CKCD_SPEC_LEN is refused naming the option, never cut."""
    err = refused(tc("disc", "bands", "map", "4" * 5000))
    assert 'ckcd: option "map": a value of 5000 bytes does not fit' in err


def test_options_too_long_together_are_refused(tc):
    """The composed TCA_CKCD_PARAMS is checked against TCA_CKCD_SPEC_LEN, naming the option that
    overflows it; the longest that fits (4095 bytes and its NUL) is sent."""
    head = "map=" + "4" * (SPEC_LEN - 1 - len("map=") - len(" default=1"))
    assert accepted(tc("disc", "bands", head, "default", "1")) == {DISC: "bands", PARAMS: f"{head} default=1"}
    assert 'option "default": a value of 2 bytes does not fit' in refused(tc("disc", "bands", head, "default", "10"))


def test_text_value_with_a_space_is_refused(tc):
    """A value is one word of "name=value ...": a space or '|' in it is refused naming the option."""
    assert 'option "map": "46:0 10:1" has a space' in refused(tc("disc", "bands", "map", "46:0 10:1"))
    assert 'option "map"' in refused(tc("disc", "bands", "map", "46:0|ckcd"))


# ---- the protocol of ckcd_nl.h: SPEC alone, or DISC and/or PARAMS ---------------------------

def test_options_send_only_params(tc):
    """Options without `disc` send TCA_CKCD_PARAMS alone, so a change keeps the running discipline and
    every parameter not given (no SPEC, no DISC)."""
    assert accepted(tc("limit", "120")) == {PARAMS: "limit=120"}


def test_disc_sends_disc_and_params(tc):
    """`disc red limit 200` sends TCA_CKCD_DISC "red" and TCA_CKCD_PARAMS "limit=200"; `disc red` alone
    only the DISC."""
    assert accepted(tc("disc", "red", "limit", "200")) == {DISC: "red", PARAMS: "limit=200"}
    assert accepted(tc("disc", "red")) == {DISC: "red"}


def test_spec_is_sent_alone(tc):
    """`spec "..."` sends TCA_CKCD_SPEC alone; with any other option or `disc` it is refused."""
    assert accepted(tc("spec", "bands | ckcd")) == {SPEC: "bands | ckcd"}
    msg = '"spec" takes the whole configuration: no other options'
    assert msg in refused(tc("limit", "5", "spec", "ckcd"))
    assert msg in refused(tc("disc", "red", "spec", "red"))
    assert "longer than 4095 bytes" in refused(tc("spec", "ckcd" + " " * SPEC_LEN))


def test_no_options_send_an_empty_nest(tc):
    """No options at all: an empty TCA_OPTIONS nest (the kernel takes the defaults at init and refuses
    a change with nothing in it)."""
    assert accepted(tc()) == {}


def test_names_aliases_and_core_spelling(tc):
    """Options take the core's names, their unit-less aliases and the core's name=value spelling, and
    are sent in the core's names and units, in the order given."""
    sent = accepted(tc("limit", "80", "delta", "100ms", "d", "5ms", "rate", "100mbit", "rtt", "20ms"))
    assert sent == {PARAMS: "limit=80 delta_ms=100 d_ms=5 rate_bps=100000000 rtt_ms=20"}
    assert accepted(tc("limit=81", "d_ms=0.5")) == {PARAMS: "limit=81 d_ms=0.5"}


def test_without_disc_any_disciplines_names_are_accepted(tc):
    """Without `disc` the discipline is the running one at change, so another discipline's option
    is sent (max_p of red; max of red and sfb, which convert alike; codel's target with its unit);
    with `disc` only that discipline's names are, as before."""
    assert accepted(tc("max_p", "0.1")) == {PARAMS: "max_p=0.1"}
    assert accepted(tc("max", "30", "target", "500us")) == {PARAMS: "max=30 target_ms=0.5"}
    assert accepted(tc("disc", "red", "max_p", "0.1")) == {DISC: "red", PARAMS: "max_p=0.1"}
    assert 'ckcd: red has no option "d"' in refused(tc("disc", "red", "d", "5ms"))


def test_unknown_names_and_help(tc):
    """An unknown name is refused by the plugin itself; `help` lists the discipline's options."""
    assert 'ckcd: ckcd has no option "lmit"' in refused(tc("lmit", "3"))
    assert 'ckcd: unknown discipline "nope"' in refused(tc("disc", "nope"))
    err = refused(tc("help"))
    assert "Usage: ... ckcd" in err and "rate_bps" in err
    assert "max_p" in refused(tc("disc", "red", "help"))


# ---- the printer ----------------------------------------------------------------------------

def _nlattr(typ: int, data: bytes) -> bytes:
    return struct.pack("=HH", 4 + len(data), typ) + data + b"\0" * (-len(data) % 4)


def _show(plugin_dir, tmp_path, spec: str) -> str:
    """What `tc qdisc show` prints for a dump carrying `spec`, through `tc monitor file`."""
    opts = _nlattr(SPEC, spec.encode() + b"\0")
    body = struct.pack("=BxxxiIII", 0, 1, 0x10000, 0xFFFFFFFF, 2) + _nlattr(TCA_KIND, b"ckcd\0") \
        + _nlattr(TCA_OPTIONS, opts)
    path = tmp_path / "dump"
    path.write_bytes(struct.pack("=IHHII", 16 + len(body), RTM_NEWQDISC, 0, 0, 0) + body)
    res = subprocess.run([TC, "monitor", "file", str(path)], text=True, capture_output=True,
                         env={**os.environ, "TC_LIB_DIR": plugin_dir})
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_print_long_spec_whole(plugin_dir, tmp_path):
    """The printer shows a spec of any length (the kernel dumps ~2500 bytes for 8 bands), not the
    first 1023 bytes of it."""
    bands = " | ".join(f"ckcd limit={i} rate_bps={10**11 + i} window_ms=1000.5" for i in range(60))
    spec = f"bands map=46:1 | {bands}"
    assert len(spec) > 3000
    assert _show(plugin_dir, tmp_path, spec).rstrip().endswith(f'spec "{spec}"')
    out = _show(plugin_dir, tmp_path, "red " + " ".join(f"limit={i}" for i in range(400)))
    assert "disc red limit 0 limit 1 " in out and out.rstrip().endswith("limit 399")
