"""The real-model lab's prompt set: code, maths, chat and long-context requests, made in code.

Every prompt is a template filled from lists written here (maths from seeded numbers; long
context from the docstrings of a fixed list of standard-library modules), so the set is the
same on every machine with the same Python minor release; its fingerprint is recorded. The
split is by prompt: a prompt's kind-wise rank in a seeded shuffle puts the first
`HELDOUT_PER_KIND` of each kind in the held-out split and the rest in training, so no prompt
text is in both (checked). The held-out split was set aside before any draft was trained.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import random
import re
from dataclasses import asdict, dataclass

KINDS = ("code", "maths", "chat", "long")
SEED = 39
HELDOUT_PER_KIND = 24
PASSAGE_CHARS = (1500, 3000)  # long-context passages: 400-900 tokens


@dataclass(frozen=True)
class Prompt:
    id: str      # kind-number, stable across runs
    kind: str
    text: str    # the user's message
    split: str   # "train" or "heldout"


CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "returns the n-th Fibonacci number",
    "counts the vowels in a string", "merges two sorted lists", "removes duplicates from a list "
    "while keeping the order", "computes the factorial of a number", "finds the largest element "
    "of a list", "checks whether a string is a palindrome", "flattens a nested list",
    "converts Celsius to Fahrenheit", "returns the sum of the digits of an integer",
    "sorts a list of dictionaries by a key", "counts how often each word occurs in a text",
    "finds the greatest common divisor of two numbers", "checks whether two strings are anagrams",
    "reads a CSV file and returns its rows", "computes the average of a list of numbers",
    "returns the second largest number in a list", "capitalizes the first letter of each word",
    "implements binary search", "implements bubble sort", "transposes a matrix",
    "returns all even numbers from a list", "converts a decimal number to binary",
    "validates an email address with a regular expression", "computes the median of a list",
    "finds the longest word in a sentence", "rotates a list by k positions",
    "chunks a list into groups of n", "returns the intersection of two lists",
    "counts the lines in a text file", "generates all permutations of a string",
    "checks whether a year is a leap year", "computes compound interest",
    "parses a date string into a datetime", "returns the most common element of a list",
    "implements a stack class", "implements a queue with two stacks",
    "computes the dot product of two vectors", "removes whitespace from both ends of each line",
    "converts a Roman numeral to an integer", "checks whether brackets in a string are balanced",
    "returns the prime factors of a number", "memoizes a function with a dictionary",
    "reads a JSON file and prints its keys", "computes the Levenshtein distance",
    "finds the missing number in a list from 1 to n", "groups words by their first letter",
    "counts the uppercase letters in a string", "implements a simple linked list",
    "returns the running total of a list", "checks whether a list is sorted",
]
CODE_LANGS = ["Python", "JavaScript", "Python", "C", "Python", "Go"]
CODE_TEMPLATES = [
    "Write a {lang} function that {task}.",
    "How do I write a {lang} function that {task}? Show the code.",
    "Write a {lang} program that {task}, with a short explanation.",
    "Give me a {lang} snippet that {task} and explain how it works.",
    "Can you write a function in {lang} that {task}? Add comments.",
    "I need a {lang} function that {task}. Please include an example call.",
]

MATHS_TEMPLATES = [
    "What is {a} times {b}?",
    "What is {a} plus {b} minus {c}?",
    "Solve for x: {a}x + {b} = {c}.",
    "A shop sells pencils for {a} cents each. How much do {b} pencils cost in dollars?",
    "{name} has {a} apples and gives away {c}. How many apples are left?",
    "A train travels {a} kilometres in {b} hours. What is its average speed?",
    "What is {p} percent of {a}?",
    "A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
    "What is the square root of {sq}?",
    "If a recipe needs {b} eggs for {c} people, how many eggs are needed for {a} people?",
    "Explain step by step how to compute {a} divided by {b}.",
    "{name} saves {b} dollars every week. How many weeks until {name} has {a} dollars?",
]
NAMES = ["Alice", "Bob", "Maria", "Omar", "Lena", "Kenji", "Priya", "Tom", "Sofia", "Ahmed"]

CHAT_TOPICS = [
    "better sleep", "learning a new language", "staying focused while studying", "saving money",
    "running a first marathon", "keeping houseplants alive", "cooking for one person",
    "public speaking", "working from home", "reducing stress", "writing a cover letter",
    "planning a trip to Japan", "starting a vegetable garden", "learning to play the guitar",
    "making friends in a new city", "drinking more water", "reading more books",
    "preparing for a job interview", "keeping a journal", "taking better photos with a phone",
    "training a puppy", "eating healthier", "managing time", "learning to code",
    "decluttering a home", "camping for the first time", "being more productive in the morning",
    "negotiating a salary", "caring for a cat", "riding a bike in a city",
]
CHAT_CONCEPTS = [
    "photosynthesis", "inflation", "the water cycle", "gravity", "machine learning",
    "the immune system", "climate change", "supply and demand", "black holes", "democracy",
    "the internet", "vaccines", "electricity", "evolution", "the stock market", "volcanoes",
    "the seasons", "recycling", "DNA", "the moon's phases", "rainbows", "compound interest",
    "cloud computing", "earthquakes", "the French Revolution", "renewable energy",
]
CHAT_PAIRS = [
    ("a virus", "a bacterium"), ("weather", "climate"), ("a lake", "a sea"),
    ("RAM", "storage"), ("a crocodile", "an alligator"), ("tea", "coffee"),
    ("a poem", "a song"), ("speed", "velocity"), ("a loan", "a grant"), ("a moth", "a butterfly"),
    ("Python", "JavaScript"), ("a city", "a town"), ("an atom", "a molecule"),
    ("baking", "roasting"), ("a comet", "an asteroid"), ("a mountain", "a hill"),
]
CHAT_TEMPLATES = [
    ("Give me three tips for {topic}.", "topic"),
    ("What are some good ways to get started with {topic}?", "topic"),
    ("Write a short poem about {topic}.", "topic"),
    ("I'm struggling with {topic}. Any advice?", "topic"),
    ("Explain {concept} in simple terms.", "concept"),
    ("Explain {concept} to a ten-year-old.", "concept"),
    ("Write a short paragraph about {concept}.", "concept"),
    ("What is the difference between {x} and {y}?", "pair"),
    ("Which is better, {x} or {y}? Explain briefly.", "pair"),
    ("Tell me a fun fact about {concept}.", "concept"),
    ("Write a short story about someone {topic_ing}.", "story"),
    ("What are common mistakes people make with {topic}?", "topic"),
    ("Why is {concept} important?", "concept"),
    ("Write a haiku about {concept}.", "concept"),
]

LONG_MODULES = [
    "argparse", "asyncio", "bisect", "calendar", "collections", "configparser", "contextlib",
    "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "email", "enum", "fnmatch",
    "fractions", "functools", "glob", "gzip", "heapq", "hmac", "html", "http", "imaplib",
    "inspect", "ipaddress", "itertools", "json", "logging", "mailbox", "math", "operator",
    "optparse", "os", "pathlib", "pickle", "platform", "pprint", "queue", "random", "re",
    "sched", "secrets", "selectors", "shelve", "shlex", "shutil", "smtplib", "socket",
    "sqlite3", "statistics", "string", "struct", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "trace", "typing", "unittest", "urllib",
    "uuid", "warnings", "weakref", "xml", "zipfile", "zlib",
]
LONG_TEMPLATES = [
    "Summarize the following documentation in a few sentences.\n\n{passage}",
    "Read this text and explain its main points.\n\n{passage}",
    "{passage}\n\nWhat is the text above about? Answer briefly.",
    "Here is part of a library's documentation:\n\n{passage}\n\nWhat would you use it for?",
]


def code_prompts() -> list[str]:
    return [t.format(lang=CODE_LANGS[(i + j) % len(CODE_LANGS)], task=task)
            for i, task in enumerate(CODE_TASKS) for j, t in enumerate(CODE_TEMPLATES)]


def maths_prompts(n: int = 720) -> list[str]:
    rng = random.Random(SEED)
    out = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 30)
        c = rng.randint(1, a)
        out.append(MATHS_TEMPLATES[i % len(MATHS_TEMPLATES)].format(
            a=a * (1 + i % 3), b=b, c=c, p=rng.choice([5, 10, 15, 20, 25, 50, 75]),
            sq=rng.randint(2, 30) ** 2, name=NAMES[rng.randrange(len(NAMES))]))
    return list(dict.fromkeys(out))


def chat_prompts() -> list[str]:
    out = []
    for template, slot in CHAT_TEMPLATES:
        if slot == "topic":
            out += [template.format(topic=t) for t in CHAT_TOPICS]
        elif slot == "story":
            out += [template.format(topic_ing="trying " + t) for t in CHAT_TOPICS]
        elif slot == "concept":
            out += [template.format(concept=c) for c in CHAT_CONCEPTS]
        else:
            out += [template.format(x=x, y=y) for x, y in CHAT_PAIRS]
    return out


def module_text(name: str) -> str:
    """A module's docstring, then its public members' docstrings (in name order)."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return ""
    parts = [module.__doc__ or ""]
    for attr in sorted(dir(module)):
        obj = getattr(module, attr, None)
        if attr.startswith("_") or getattr(obj, "__module__", None) != name:
            continue
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str) and len(doc) > 80:
            parts.append(f"{attr}: {inspect.cleandoc(doc)}")
    return "\n\n".join(p for p in parts if p)


def passages() -> list[str]:
    """Paragraph-aligned passages of PASSAGE_CHARS from the listed modules' docstrings."""
    out = []
    for name in LONG_MODULES:
        doc = module_text(name)
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", doc) if p.strip()]
        chunk = ""
        for para in paragraphs:
            chunk = f"{chunk}\n\n{para}" if chunk else para
            if len(chunk) >= PASSAGE_CHARS[0]:
                out.append(chunk[:PASSAGE_CHARS[1]])
                chunk = ""
    return out


def long_prompts() -> list[str]:
    return [LONG_TEMPLATES[i % len(LONG_TEMPLATES)].format(passage=p)
            for i, p in enumerate(passages())]


def prompt_set() -> list[Prompt]:
    """Every prompt with its split; held-out first (generation order), then training,
    round-robin over the kinds so any prefix of the training split is balanced."""
    makers = {"code": code_prompts, "maths": maths_prompts, "chat": chat_prompts,
              "long": long_prompts}
    by_kind = {}
    for kind in KINDS:
        texts = list(dict.fromkeys(makers[kind]()))
        order = list(range(len(texts)))
        random.Random(f"{SEED}-{kind}").shuffle(order)
        by_kind[kind] = [Prompt(f"{kind}-{i:04d}", kind, texts[i],
                                "heldout" if rank < HELDOUT_PER_KIND else "train")
                         for rank, i in enumerate(order)]
    heldout = [p for kind in KINDS for p in by_kind[kind] if p.split == "heldout"]
    train_lists = [[p for p in by_kind[kind] if p.split == "train"] for kind in KINDS]
    train = [lst[i] for i in range(max(map(len, train_lists))) for lst in train_lists if i < len(lst)]
    texts = [p.text for p in heldout]
    assert not set(texts) & {p.text for p in train}, "a prompt in both splits"
    return heldout + train


def fingerprint(prompts: list[Prompt]) -> str:
    blob = json.dumps([asdict(p) for p in prompts], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def summary(prompts: list[Prompt]) -> dict:
    count = {s: {k: sum(p.split == s and p.kind == k for p in prompts) for k in KINDS}
             for s in ("train", "heldout")}
    return {"seed": SEED, "fingerprint": fingerprint(prompts), "counts": count,
            "heldout_per_kind": HELDOUT_PER_KIND}
