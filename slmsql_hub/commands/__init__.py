"""Subcommands of the ``slmsql`` CLI. Each module defines ``add_parser(subparsers)``; the parser it adds
sets ``run=<function(args) -> int>`` as its default. Keep them thin: parse, call the library, print."""
