"""The vocabulary of each engine's speculative-decoding log lines. Not: the parser that applies it (sources.log_parser).

Conversions: "num" takes the leading number ("150 tokens" -> 150, "38.8%" -> 38.8, then /100
for rate columns), "list" a comma list of numbers, "bool" True/False.

An engine names its grammar (`engines.get(name).log_grammar`); llama.cpp and TensorRT-LLM have
a grammar and no engine folder. May import: nothing of eagle3lab.
"""

NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|-?inf"
