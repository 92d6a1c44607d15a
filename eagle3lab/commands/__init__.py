"""CLI subcommands: one module each, with HELP, add_arguments(parser) and run(args) -> int. Not: the work itself (each command calls the package that does it).

Modules import heavy libraries inside run(), so `eagle3lab --help` stays fast.

The front door: may import any room.
"""
