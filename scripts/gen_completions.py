"""Regenerate completions/ from the command registry: python scripts/gen_completions.py"""

from __future__ import annotations

from pathlib import Path

from mqadmin.completion import SHELLS, generate

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    for shell, rel in SHELLS.items():
        path = ROOT / "completions" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generate(shell))
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
