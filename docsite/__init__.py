"""The documentation site's tooling: the CI markers of command blocks and their runner
(`python -m docsite run`), the generated reference pages (`python -m docsite reference`)
and the MkDocs hook that shows on each page how CI runs its commands."""
