"""Verified, resumable downloads of data set files, with an optional mirror.

`fetch` returns the local path of a copy of a `Resource` that passed its pinned
size/sha256 checks. Sources are tried in order: the mirror (argument, else the
`T2T_DATA_MIRROR` environment variable), then the canonical URL. Bytes stream to
`<directory>/<filename>.partial`, which is resumed with an HTTP Range request after an
interruption and renamed to the final name only once it verifies.

Pure standard library; imports no TensorFlow.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import gzip
import hashlib
import http.client
import os
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator

import gin
from absl import logging

MIRROR_ENV_VAR = "T2T_DATA_MIRROR"

# Retry delay is BACKOFF_BASE * 2**(attempt - 1) seconds; tests monkeypatch this to 0.
BACKOFF_BASE = 1.0
# Minimum seconds between two progress lines.
PROGRESS_INTERVAL = 0.5

_USER_AGENT = "t2t-data-fetch/1.0"
_HASH_CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A file could not be fetched from any source."""


class ChecksumError(DownloadError):
    """A fetched file did not match its pinned size or checksum."""


class _TransientError(Exception):
    """A failure worth retrying (connection error, timeout, 5xx, short body)."""


@dataclasses.dataclass(frozen=True)
class Resource:
    """A remote file and what it must hash to."""

    url: str
    sha256: str | None = None
    size: int | None = None
    filename: str | None = None
    payload_sha256: str | None = None

    @property
    def local_name(self) -> str:
        """The file name used in the download directory and on mirrors."""
        name = self.filename
        if name is None:
            name = urllib.parse.unquote(
                os.path.basename(urllib.parse.urlparse(self.url).path)
            )
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise ValueError(
                f"Cannot derive a plain file name for resource {self.url!r} "
                f"(got {name!r}); pass Resource(filename=...)."
            )
        return name


def sha256_of(path: str) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def payload_sha256_of(gz_path: str) -> str:
    """Hex sha256 of the decompressed contents of a gzip file, streamed."""
    digest = hashlib.sha256()
    with gzip.open(gz_path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _verify(path: str, resource: Resource, source: str) -> None:
    """Raises ChecksumError unless `path` matches what `resource` pins."""
    name = resource.local_name
    direct_pinned = resource.sha256 is not None or resource.size is not None
    if not direct_pinned and resource.payload_sha256 is None:
        logging.warning(
            "%s (from %s) is UNVERIFIED: its Resource pins no size or sha256.",
            name,
            source,
        )
        return
    problems = []
    if resource.size is not None:
        actual_size = os.path.getsize(path)
        if actual_size != resource.size:
            problems.append(
                f"size: expected {resource.size} bytes, got {actual_size} bytes"
            )
    if resource.sha256 is not None:
        actual = sha256_of(path)
        if actual != resource.sha256.lower():
            problems.append(f"sha256: expected {resource.sha256.lower()}, got {actual}")
    if direct_pinned and not problems:
        return
    if resource.payload_sha256 is not None:
        expected = resource.payload_sha256.lower()
        if not _is_gzip(path):
            problems.append("payload_sha256 is pinned but the file is not gzip")
        else:
            try:
                actual = payload_sha256_of(path)
            except (OSError, EOFError, zlib.error) as e:
                problems.append(f"payload could not be decompressed: {e}")
            else:
                if actual == expected:
                    if problems:
                        logging.warning(
                            "%s from %s differs from the published file (%s), but its "
                            "decompressed payload verified (sha256 %s): the copy was "
                            "re-compressed by a mirror. Accepting it.",
                            name,
                            source,
                            "; ".join(problems),
                            actual,
                        )
                    return
                problems.append(f"payload sha256: expected {expected}, got {actual}")
    raise ChecksumError(
        f"Checksum mismatch for {name} fetched from {source}: {'; '.join(problems)}. "
        "The bad copy was deleted. The source may be stale or corrupt (for example an "
        "outdated mirror): delete the file and retry, or point --data_mirror / "
        f"{MIRROR_ENV_VAR} elsewhere."
    )


class _Progress:
    """Throttled progress lines on stderr."""

    def __init__(self, name: str, total: int | None, start: int, enabled: bool):
        self.name, self.total, self.enabled = name, total, enabled
        self.start_bytes = start
        self.t0 = self.last = time.monotonic()
        self.printed = False

    def update(self, done: int, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        rate = (done - self.start_bytes) / max(now - self.t0, 1e-6)
        total = "?" if self.total is None else _human(self.total)
        pct = f" ({100.0 * done / self.total:.0f}%)" if self.total else ""
        sys.stderr.write(
            f"\r{self.name}: {_human(done)} / {total}{pct} at {_human(rate)}/s"
            + ("\n" if final else "")
        )
        sys.stderr.flush()
        self.printed = True

    def abort(self) -> None:
        if self.enabled and self.printed:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


@dataclasses.dataclass(frozen=True)
class _Options:
    retries: int
    timeout: float
    progress: bool
    chunk_size: int


def _http_once(url: str, partial: str, name: str, opts: _Options) -> None:
    """One attempt to complete `partial` from `url`, resuming when it exists."""
    offset = os.path.getsize(partial) if os.path.exists(partial) else 0
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=opts.timeout)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code == 416 and offset:
            # Nothing left to send: the partial is probably complete. Let it be verified.
            logging.info(
                "%s: server says the %d bytes already held are complete.", url, offset
            )
            return
        if e.code >= 500 or e.code in (408, 429):
            raise _TransientError(f"HTTP {e.code} {e.reason}") from e
        raise DownloadError(f"HTTP {e.code} {e.reason} for {url}") from e
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise _TransientError(f"{type(e).__name__}: {e}") from e
    with response:
        status = response.status
        length = response.headers.get("Content-Length")
        length = int(length) if length is not None and length.isdigit() else None
        mode = "wb"
        if status == 206 and offset:
            content_range = response.headers.get("Content-Range", "")
            if content_range.startswith(f"bytes {offset}-"):
                mode = "ab"
            else:
                logging.warning(
                    "%s: unexpected Content-Range %r for a resume at byte %d; "
                    "restarting from zero.",
                    url,
                    content_range,
                    offset,
                )
                _remove(partial)
                raise _TransientError(f"bad Content-Range {content_range!r}")
        elif offset:
            logging.info(
                "%s: server ignored the Range request; restarting from zero.", url
            )
        start = offset if mode == "ab" else 0
        total = start + length if length is not None else None
        bar = _Progress(name, total, start, opts.progress)
        done = start
        try:
            with open(partial, mode) as out:
                while True:
                    try:
                        chunk = response.read(opts.chunk_size)
                    except (OSError, http.client.HTTPException) as e:
                        raise _TransientError(f"connection lost after {done} bytes: {e}") from e
                    if not chunk:
                        break
                    out.write(chunk)
                    done += len(chunk)
                    bar.update(done)
        except _TransientError:
            bar.abort()
            raise
        except OSError as e:  # writing failed (disk full...): a retry would fail the same
            bar.abort()
            raise DownloadError(
                f"could not write {partial} ({e.strerror or e}); free space in "
                f"{os.path.dirname(os.path.abspath(partial))} and run again") from e
        if total is not None and done < total:
            bar.abort()
            raise _TransientError(f"connection closed after {done} of {total} bytes")
        bar.update(done, final=True)


def _http_download(url: str, partial: str, name: str, opts: _Options,
                   resource: Resource | None = None) -> None:
    """Completes `partial` from `url`, retrying transient failures with backoff."""
    attempt = 0
    while True:
        attempt += 1
        try:
            _http_once(url, partial, name, opts)
            return
        except _TransientError as e:
            if resource is not None and _matches_pins(partial, resource):
                # A wrong Content-Length: the bytes received are the pinned file.
                logging.warning("%s: %s, but the bytes received match the pinned sha256: "
                                "the server's Content-Length is wrong; accepted.", url, e)
                return
            if attempt > opts.retries:
                raise DownloadError(f"{e} (gave up after {attempt} attempts)") from e
            delay = BACKOFF_BASE * 2 ** (attempt - 1)
            logging.warning(
                "Fetching %s failed (%s); retry %d of %d in %.1f s.",
                url,
                e,
                attempt,
                opts.retries,
                delay,
            )
            time.sleep(delay)


def _matches_pins(path: str, resource: Resource) -> bool:
    """Whether `path` has the pinned sha256 (and size, if pinned)."""
    if resource.sha256 is None or not os.path.exists(path):
        return False
    if resource.size is not None and os.path.getsize(path) != resource.size:
        return False
    return sha256_of(path) == resource.sha256.lower()


def _local_mirror_dir(mirror: str) -> str | None:
    """The folder a mirror names, or None when it is a remote URL prefix."""
    parsed = urllib.parse.urlparse(mirror)
    if parsed.scheme == "file":
        return urllib.request.url2pathname(parsed.path)
    if parsed.scheme in ("http", "https", "ftp"):
        return None
    return os.path.expanduser(mirror)


def _sources(resource: Resource, mirror: str | None) -> list[tuple[str, str, bool]]:
    """(description, location, is_local) for each source, in the order to try."""
    name = resource.local_name
    sources = []
    if mirror:
        folder = _local_mirror_dir(mirror)
        if folder is None:
            url = mirror if mirror.endswith("/") else mirror + "/"
            url += urllib.parse.quote(name)
            sources.append((f"mirror {url}", url, False))
        else:
            path = os.path.join(folder, name)
            sources.append((f"mirror folder {path}", path, True))
    canonical = resource.url
    if urllib.parse.urlparse(canonical).scheme == "file":
        path = urllib.request.url2pathname(urllib.parse.urlparse(canonical).path)
        sources.append((f"canonical {canonical}", path, True))
    else:
        sources.append((f"canonical {canonical}", canonical, False))
    return sources


def _copy_local(src: str, partial: str, chunk_size: int) -> None:
    if not os.path.isfile(src):
        raise DownloadError(f"{src} does not exist")
    try:
        with open(src, "rb") as fin, open(partial, "wb") as fout:
            shutil.copyfileobj(fin, fout, chunk_size)
    except OSError as e:
        raise DownloadError(f"copy failed: {e}") from e


@gin.configurable
@dataclasses.dataclass
class DownloadConfig:
    """Defaults of `fetch`, settable with gin (`DownloadConfig.retries = 5`)."""

    retries: int = 3
    timeout: float = 60.0  # seconds


_ACTIVE_MIRROR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "t2t_data_mirror", default=None)


@contextlib.contextmanager
def active_mirror(mirror: str | None) -> Iterator[None]:
    """`fetch` calls without a mirror use `mirror` meanwhile (a problem's --data_mirror
    reaches code that downloads through generator_utils.maybe_download)."""
    token = _ACTIVE_MIRROR.set(mirror)
    try:
        yield
    finally:
        _ACTIVE_MIRROR.reset(token)


def fetch(
    resource: Resource,
    directory: str,
    mirror: str | None = None,
    *,
    retries: int | None = None,
    timeout: float | None = None,
    progress: bool = True,
    chunk_size: int = 1 << 20,
) -> str:
    """Returns the local path of a verified copy of `resource` in `directory`.

    Args:
      resource: what to fetch and what it must hash to.
      directory: where the file is kept (created if needed).
      mirror: URL prefix or local folder tried before the canonical URL; defaults to
        the T2T_DATA_MIRROR environment variable.
      retries: retries per HTTP source after the first attempt (transient errors only);
        default DownloadConfig.retries.
      timeout: socket timeout in seconds; default DownloadConfig.timeout.
      progress: whether to print progress lines to stderr.
      chunk_size: bytes per read.

    Raises:
      ChecksumError: every source failed and at least one gave a file that did not verify.
      DownloadError: every source failed.
    """
    name = resource.local_name
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    if _existing_copy_verifies(final, resource):
        return final

    if mirror is None:
        mirror = _ACTIVE_MIRROR.get() or os.environ.get(MIRROR_ENV_VAR) or None
    defaults = DownloadConfig()
    opts = _Options(
        defaults.retries if retries is None else retries,
        defaults.timeout if timeout is None else timeout,
        progress,
        chunk_size,
    )
    failures: list[_SourceFailure] = []
    for source in _sources(resource, mirror):
        failure = _fetch_from_source(source, resource, final, opts)
        if failure is None:
            return final
        if failure.message:
            failures.append(failure)
    raise _all_sources_failed(name, final, failures)


def _existing_copy_verifies(final: str, resource: Resource) -> bool:
    """Whether `final` is already there and verifies; a copy that does not is deleted."""
    if not os.path.exists(final):
        return False
    try:
        _verify(final, resource, f"existing file {final}")
        return True
    except ChecksumError as e:
        logging.warning("Deleting %s and fetching it again: %s", final, e)
        _remove(final)
        return False


@dataclasses.dataclass(frozen=True)
class _SourceFailure:
    """Why one source gave no verified copy ("" when it gave up without an error)."""

    message: str
    checksum: bool = False


def _fetch_from_source(
    source: tuple[str, str, bool], resource: Resource, final: str, opts: _Options
) -> _SourceFailure | None:
    """Fetches, verifies and renames one source's copy to `final`; None on success."""
    description, location, is_local = source
    name = resource.local_name
    partial = final + ".partial"
    logging.info("Fetching %s from %s", name, description)
    # At most two rounds: a resumed partial that fails verification is refetched once.
    for _ in range(2):
        resumed = not is_local and os.path.exists(partial)
        if resumed:
            logging.info("Resuming %s from byte %d.", partial, os.path.getsize(partial))
        try:
            if is_local:
                _copy_local(location, partial, opts.chunk_size)
            else:
                _http_download(location, partial, name, opts, resource)
            _verify(partial, resource, description)
        except ChecksumError as e:
            _remove(partial)
            if resumed:
                logging.warning("Resumed download did not verify; restarting: %s", e)
                continue
            logging.warning("%s", e)
            return _SourceFailure(f"{description}: {e}", checksum=True)
        except DownloadError as e:
            if is_local:
                _remove(partial)
            logging.warning("Could not fetch %s from %s: %s", name, description, e)
            return _SourceFailure(f"{description}: {e}")
        os.replace(partial, final)
        logging.info("Fetched %s from %s", final, description)
        return None
    return _SourceFailure("")


def _all_sources_failed(name: str, final: str, failures: list[_SourceFailure]) -> DownloadError:
    """The error `fetch` raises: ChecksumError if any source gave a bad copy."""
    # A partial left by a failed HTTP source may be resumed by the next run; a
    # partial from a rejected source was already removed.
    error = ChecksumError if any(f.checksum for f in failures) else DownloadError
    lines = "\n".join(f"  - {f.message}" for f in failures)
    partial = final + ".partial"
    kept = (f"The {os.path.getsize(partial)} bytes received are kept in {partial}: running "
            f"again resumes from there (delete it to start over).\n"
            if os.path.exists(partial) else "")
    return error(
        f"Could not fetch {name}. Sources tried:\n{lines}\n{kept}"
        f"To fix: download the file yourself and place it at {final}, or set "
        f"--data_mirror (or the {MIRROR_ENV_VAR} environment variable) to a URL prefix "
        f"or folder that holds {name}."
    )
