"""llama.cpp speculative statistics: `draft acceptance = 0.64479 (  167 accepted /   259
generated), mean acceptance length =  2.92, acceptance rate per position = (0.805, ...)`
(llama.cpp PR #24536 sample, docs/sources.md). Not `key: value` pairs: fields by pattern."""

import re

from eagle3lab.sources.grammars import NUM

MARKER = r"(?P<llama>draft acceptance\s*=)"

FIELDS = (
    ("draft_accept_rate", re.compile(r"draft acceptance\s*=\s*(" + NUM + ")")),
    ("accepted", re.compile(r"(\d+)\s+accepted\b")),
    ("drafted", re.compile(r"(\d+)\s+generated\b")),
    ("accept_len", re.compile(r"mean acceptance length\s*=\s*(" + NUM + ")")),
)
PER_POSITION_RX = re.compile(r"acceptance rate per position\s*=\s*\(([^)]*)(\)?)")
