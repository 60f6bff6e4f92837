"""Every sub-command parser of ``wsikit``, by its command words (for tests over all of them)."""

from __future__ import annotations

import argparse


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    """``{"index build": parser, ...}``: every parser ``wsikit --help`` reaches."""
    from wsikit.cli import build_parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        found[" ".join(words)] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(build_parser(), ())
    return found


def option_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """``{"--flag": action}`` of ``parser``."""
    return {s: a for a in parser._actions for s in a.option_strings}
