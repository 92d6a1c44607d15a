"""The vocabulary of each engine's speculative-decoding log lines: the marker that starts a
record, the `key: value` fields kept (key as printed, lower case -> (column, conversion)) and
the fields recognised but not kept. `eagle3lab.sources.log_parser` composes them into one
line grammar; docs/sources.md describes each format and where it was read.

Conversions: "num" takes the leading number ("150 tokens" -> 150, "38.8%" -> 38.8, then /100
for rate columns), "list" a comma list of numbers, "bool" True/False.

An engine names its grammar (`engines.get(name).log_grammar`); llama.cpp and TensorRT-LLM have
a grammar and no engine folder. May import: nothing of eagle3lab.
"""

NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|-?inf"
