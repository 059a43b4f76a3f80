"""A small in-memory Hugging Face Hub API server for tests (stdlib only; not shipped with the package).

It implements the part of the Hub's HTTP API that ``huggingface_hub`` 2.x, ``datasets`` and ``evaluate``
use to push and pull repositories, with the shapes their clients parse:

- ``GET /api/whoami-v2``; ``POST /api/validate-yaml``; ``POST /api/repos/create`` (a 409 for an existing repo
  still carries ``{"url": ...}``, which ``create_repo(exist_ok=True)`` relies on);
- ``GET /api/{type}s/{id}`` and ``.../revision/{rev}`` (repo info with ``sha``, ``siblings``, ``cardData``);
  ``GET .../tree/{rev}[/{path}]`` (``recursive``; a missing path is 404 with ``X-Error-Code: EntryNotFound``);
  ``POST .../paths-info/{rev}``; ``GET .../refs`` (``include_prs``); ``GET .../commits/{rev}``;
  ``POST``/``DELETE .../branch/{name}``; ``POST .../tag/{rev}``;
- ``POST .../preupload/{rev}`` (every entry carries ``uploadMode``, ``shouldIgnore`` and the remote ``oid``);
  ``POST .../commit/{rev}`` (NDJSON: ``header`` / ``file`` / ``lfsFile`` / ``deletedFile`` /
  ``deletedFolder``; ``parentCommit`` checked, 412 when stale; ``?create_pr=1`` opens ``refs/pr/N``);
- the Git LFS batch API (``POST /{prefix}{id}.git/info/lfs/objects/batch``) with basic ``PUT`` uploads that are
  checked against their sha256 and size, and a verify action;
- ``HEAD``/``GET /{prefix}{id}/resolve/{rev}/{path}`` with ``X-Repo-Commit``, ``ETag`` (git blob id, or the
  sha256 as ``X-Linked-Etag`` for LFS files), ``Content-Length`` and ``Range`` requests.

``HfApi.upload_folder`` (what ``slmsql push`` calls) needs no more than that: ``validate-yaml`` for a README, the
recursive tree for ``delete_patterns``, preupload, the LFS batch and one commit with ``file`` / ``lfsFile`` /
``deletedFile`` lines (clients run with ``HF_HUB_DISABLE_XET=1``, so it takes its single-commit path).

Repositories are git-like: every commit is a full snapshot of ``path -> blob``; branches, tags and PR refs
point at commits; regular files are stored inline and LFS files by sha256. Tokens map to users; private repos
are visible to their owner only (others get 404 ``RepoNotFound``, as on the Hub). Every request is recorded in
:attr:`HubState.requests` so tests can check what a client did, or that it did nothing.

Run ``python tests/hub_server.py --port 8765 --token hf_test=alice`` to try it by hand, then point a client at it
with ``HF_ENDPOINT=http://127.0.0.1:8765 HF_HUB_DISABLE_XET=1 HF_TOKEN=hf_test``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import fnmatch
import hashlib
import json
import re
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_LFS_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".parquet",
    ".arrow",
    ".png",
    ".jpg",
    ".pt",
    ".pth",
    ".sqlite",
    ".zip",
)
_LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub's limit for regular (non-LFS) files
_GITATTRIBUTES = "".join(
    f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in _LFS_SUFFIXES
).encode()
_PR_REF = re.compile(r"refs/pr/(\d+)")


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob: ``sha1(b"blob <size>\\0" + data)``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file stored in git in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclasses.dataclass(frozen=True)
class Blob:
    """One file of a snapshot: inline ``data`` for a regular file, or an LFS ``sha256`` and ``size``."""

    size: int
    data: bytes | None = None
    sha256: str | None = None

    @property
    def oid(self) -> str:
        """The git blob id (of the pointer file for LFS files), as the Hub reports it."""
        return git_blob_id(self.data if self.data is not None else lfs_pointer(self.sha256, self.size))

    def entry(self, path: str) -> dict:
        """The tree-listing / paths-info entry for this file at ``path``."""
        entry = {"type": "file", "path": path, "size": self.size, "oid": self.oid}
        if self.sha256 is not None:
            entry["lfs"] = {
                "oid": self.sha256,
                "size": self.size,
                "pointerSize": len(lfs_pointer(self.sha256, self.size)),
            }
        return entry


@dataclasses.dataclass
class Commit:
    oid: str
    parent: str | None
    files: dict[str, Blob]
    title: str
    message: str
    author: str
    date: str


@dataclasses.dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    owner: str
    sdk: str | None
    created_at: str
    commits: dict[str, Commit] = dataclasses.field(default_factory=dict)
    branches: dict[str, str] = dataclasses.field(default_factory=dict)
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    pull_requests: dict[int, str] = dataclasses.field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        """The commit a branch, tag, ``refs/heads/x``, ``refs/pr/N`` or (short) commit id points at."""
        revision = revision.removeprefix("refs/heads/")
        if revision in self.branches:
            return self.branches[revision]
        if revision.removeprefix("refs/tags/") in self.tags:
            return self.tags[revision.removeprefix("refs/tags/")]
        match = _PR_REF.fullmatch(revision)
        if match:
            return self.pull_requests.get(int(match.group(1)))
        if re.fullmatch(r"[0-9a-f]{5,40}", revision):
            found = [oid for oid in self.commits if oid.startswith(revision)]
            return found[0] if len(found) == 1 else None
        return None


class HubError(Exception):
    """An error response: status, message, and the ``X-Error-Code`` the client maps to an exception."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = headers or {}


class HubState:
    """Repositories, LFS objects, users and the request log of one server."""

    def __init__(self, tokens: dict[str, str], orgs: dict[str, list[str]] | None = None):
        self.tokens = dict(tokens)
        self.orgs = {user: list(names) for user, names in (orgs or {}).items()}
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs: dict[str, bytes] = {}
        self.requests: list[tuple[str, str]] = []
        self.failing_commits: dict[str, int] = {}  # repo_id -> the HTTP status its commits get (an outage)
        self.lock = threading.RLock()
        self._counter = 0

    # -- helpers -----------------------------------------------------------------------------------------
    def user_for(self, authorization: str | None) -> str | None:
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        return self.tokens.get(authorization.split(" ", 1)[1].strip())

    def repo(self, repo_type: str, repo_id: str, user: str | None) -> Repo:
        repo = self.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not self._can_write(user, repo.repo_id)):
            raise HubError(404, f"Repository not found: {repo_type} {repo_id}", "RepoNotFound")
        return repo

    def _can_write(self, user: str | None, repo_id: str) -> bool:
        namespace = repo_id.split("/")[0]
        return user is not None and (namespace == user or namespace in self.orgs.get(user, []))

    def writable_repo(self, repo_type: str, repo_id: str, user: str | None) -> Repo:
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        repo = self.repo(repo_type, repo_id, user)
        if not self._can_write(user, repo_id):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    def commit_of(self, repo: Repo, revision: str) -> Commit:
        oid = repo.resolve(revision)
        if oid is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo.commits[oid]

    def new_commit(
        self, repo: Repo, parent: str | None, files: dict[str, Blob], title: str, message: str, author: str
    ):
        self._counter += 1
        digest = hashlib.sha1(f"{repo.repo_id}:{parent}:{self._counter}:{title}".encode())
        for path in sorted(files):
            digest.update(path.encode() + files[path].oid.encode())
        commit = Commit(digest.hexdigest(), parent, files, title, message, author, _now())
        repo.commits[commit.oid] = commit
        return commit

    # -- repos -------------------------------------------------------------------------------------------
    def create_repo(self, payload: dict, user: str | None, endpoint: str) -> tuple[int, dict]:
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        repo_type = payload.get("type") or "model"
        if repo_type not in _PREFIX:
            raise HubError(400, f"invalid repo type {repo_type!r}")
        name = payload.get("name") or ""
        namespace = payload.get("organization") or user
        repo_id = f"{namespace}/{name}"
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo_id) or "--" in name or ".." in name:
            raise HubError(400, f"invalid repo name {repo_id!r}")
        if repo_type == "space" and payload.get("sdk") not in ("gradio", "streamlit", "docker", "static"):
            raise HubError(400, "a Space needs an sdk")
        url = f"{endpoint}/{_PREFIX[repo_type]}{repo_id}"
        if (repo_type, repo_id) in self.repos:
            return 409, {"error": "You already created this repo", "url": url}
        if not self._can_write(user, repo_id):
            raise HubError(403, f"You don't have the rights to create a repo under {namespace}")
        private = payload.get("visibility", "public") == "private" or bool(payload.get("private"))
        repo = Repo(repo_type, repo_id, private, user, payload.get("sdk"), _now())
        initial = self.new_commit(
            repo,
            None,
            {".gitattributes": Blob(len(_GITATTRIBUTES), _GITATTRIBUTES)},
            "initial commit",
            "",
            "system",
        )
        repo.branches["main"] = initial.oid
        self.repos[(repo_type, repo_id)] = repo
        return 200, {"url": url, "name": repo_id, "id": repo_id}

    def info(self, repo: Repo, revision: str, blobs: bool) -> dict:
        commit = self.commit_of(repo, revision)
        siblings = []
        for path, blob in sorted(commit.files.items()):
            sibling: dict = {"rfilename": path}
            if blobs:
                sibling.update({"size": blob.size, "blobId": blob.oid})
                if blob.sha256 is not None:
                    sibling["lfs"] = blob.entry(path)["lfs"] | {"sha256": blob.sha256}
            siblings.append(sibling)
        info = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.oid,
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "createdAt": repo.created_at,
            "lastModified": commit.date,
            "siblings": siblings,
            "cardData": _card_data(commit.files.get("README.md")),
        }
        if repo.repo_type == "space":
            info.update({"sdk": repo.sdk, "runtime": {"stage": "NO_APP_FILE", "hardware": {"current": None}}})
        return info

    def tree(self, repo: Repo, revision: str, path: str, recursive: bool) -> list[dict]:
        files = self.commit_of(repo, revision).files
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        if prefix and prefix[:-1] in files:
            return [files[prefix[:-1]].entry(prefix[:-1])]
        entries: dict[str, dict] = {}
        for file_path, blob in files.items():
            if not file_path.startswith(prefix):
                continue
            parts = file_path[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                if recursive or depth == 1:
                    entries.setdefault(
                        folder, {"type": "directory", "path": folder, "oid": _tree_id(files, folder)}
                    )
            if recursive or len(parts) == 1:
                entries[file_path] = blob.entry(file_path)
        if prefix and not entries:
            raise HubError(404, f"{path} does not exist on {revision}", "EntryNotFound")
        return [entries[key] for key in sorted(entries)]

    def paths_info(self, repo: Repo, revision: str, paths: list[str]) -> list[dict]:
        files = self.commit_of(repo, revision).files
        found = []
        for path in paths:
            path = path.strip("/")
            if path in files:
                found.append(files[path].entry(path))
            elif any(name.startswith(path + "/") for name in files) or path == "":
                found.append({"type": "directory", "path": path, "oid": _tree_id(files, path)})
        return found

    def refs(self, repo: Repo, include_prs: bool) -> dict:
        def ref(name: str, full: str, oid: str) -> dict:
            return {"name": name, "ref": full, "targetCommit": oid}

        refs = {
            "branches": [ref(name, f"refs/heads/{name}", oid) for name, oid in sorted(repo.branches.items())],
            "converts": [],
            "tags": [ref(name, f"refs/tags/{name}", oid) for name, oid in sorted(repo.tags.items())],
        }
        if include_prs:
            refs["pullRequests"] = [
                ref(f"refs/pr/{num}", f"refs/pr/{num}", oid)
                for num, oid in sorted(repo.pull_requests.items())
            ]
        return refs

    def commits(self, repo: Repo, revision: str) -> list[dict]:
        out = []
        oid: str | None = self.commit_of(repo, revision).oid
        while oid is not None:
            commit = repo.commits[oid]
            out.append(
                {
                    "id": commit.oid,
                    "title": commit.title,
                    "message": commit.message,
                    "authors": [{"user": commit.author}],
                    "date": commit.date,
                }
            )
            oid = commit.parent
        return out

    def preupload(self, repo: Repo, revision: str, payload: dict, create_pr: bool) -> dict:
        files = {} if create_pr and repo.resolve(revision) is None else self.commit_of(repo, revision).files
        ignore = [line.strip() for line in (payload.get("gitIgnore") or "").splitlines() if line.strip()]
        out = []
        for item in payload.get("files", []):
            path, size = item["path"], int(item["size"])
            sample = base64.b64decode(item.get("sample", ""))
            lfs = size >= _LFS_THRESHOLD or path.lower().endswith(_LFS_SUFFIXES) or b"\0" in sample
            existing = files.get(path)
            remote_oid = None
            if existing is not None:
                remote_oid = existing.sha256 if lfs and existing.sha256 else git_blob_id(existing.data or b"")
            out.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": any(fnmatch.fnmatch(path, pattern) for pattern in ignore),
                    "oid": remote_oid,
                }
            )
        return {
            "files": out,
            "commitOid": self.commit_of(repo, revision).oid if repo.resolve(revision) else None,
        }

    def commit(
        self, repo: Repo, revision: str, lines: list[dict], user: str, create_pr: bool, endpoint: str
    ) -> dict:
        base = self.commit_of(repo, revision)
        header = next((line["value"] for line in lines if line["key"] == "header"), {})
        parent = header.get("parentCommit")
        if parent and not create_pr and not base.oid.startswith(parent):
            raise HubError(412, f"A commit has happened since. Please refresh and try again: {parent}")
        files = dict(base.files)
        for line in lines:
            key, value = line["key"], line["value"]
            if key == "file":
                if value.get("encoding", "base64") != "base64":
                    raise HubError(400, "only base64 file content is supported")
                data = base64.b64decode(value["content"])
                files[value["path"]] = Blob(len(data), data)
            elif key == "lfsFile":
                oid = value["oid"]
                if oid not in self.lfs:
                    raise HubError(400, f"LFS object {oid} of {value['path']} was never uploaded")
                files[value["path"]] = Blob(len(self.lfs[oid]), sha256=oid)
            elif key == "deletedFile":
                if value["path"] not in files:
                    raise HubError(
                        404, f"A file with this name doesn't exist: {value['path']}", "EntryNotFound"
                    )
                del files[value["path"]]
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                for name in [name for name in files if name.startswith(folder)]:
                    del files[name]
            elif key != "header":
                raise HubError(400, f"unknown commit operation {key!r}")
        commit = self.new_commit(
            repo, base.oid, files, header.get("summary", ""), header.get("description", ""), user
        )
        url = f"{endpoint}/{_PREFIX[repo.repo_type]}{repo.repo_id}"
        response = {"commitUrl": f"{url}/commit/{commit.oid}", "commitOid": commit.oid, "success": True}
        if create_pr:
            number = max([0, *repo.pull_requests]) + 1
            repo.pull_requests[number] = commit.oid
            response["pullRequestUrl"] = f"{url}/discussions/{number}"
        else:
            match = _PR_REF.fullmatch(revision)
            if match:
                repo.pull_requests[int(match.group(1))] = commit.oid
            else:
                repo.branches[revision.removeprefix("refs/heads/")] = commit.oid
        return response


def _tree_id(files: dict[str, Blob], folder: str) -> str:
    digest = hashlib.sha1(folder.encode())
    for path in sorted(files):
        if path.startswith(folder + "/"):
            digest.update(path.encode() + files[path].oid.encode())
    return digest.hexdigest()


def _card_data(readme: Blob | None) -> dict | None:
    """The YAML front matter of a README, as the Hub's ``cardData`` (``None`` when absent or unreadable)."""
    if readme is None or readme.data is None:
        return None
    text = readme.data.decode("utf-8", errors="replace")
    match = re.match(r"^---\s*\n(.*?)\n---\s*\n", text, re.DOTALL)
    if not match:
        return None
    try:
        import yaml
    except ImportError:  # pragma: no cover - yaml is a dependency of the project
        return None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stalls
    server: _Server

    # -- plumbing ----------------------------------------------------------------------------------------
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature; requests go to state.requests
        pass

    @property
    def state(self) -> HubState:
        return self.server.state

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self, status: int, body: bytes = b"", headers: dict | None = None, content_type="application/json"
    ):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload, headers: dict | None = None):
        self._send(status, json.dumps(payload).encode(), headers)

    def _dispatch(self):
        split = urlsplit(self.path)
        query = parse_qs(split.query)
        segments = split.path.split("/")[1:]
        with self.state.lock:
            self.state.requests.append((self.command, split.path))
        user = self.state.user_for(self.headers.get("Authorization"))
        body = self._body() if self.command in ("POST", "PUT", "DELETE") else b""
        try:
            with self.state.lock:
                if segments[:1] == ["api"]:
                    self._api(segments[1:], query, body, user)
                elif segments[:1] == ["lfs-upload"]:
                    self._lfs_upload(unquote(segments[1]), body)
                elif segments[:1] == ["lfs-verify"]:
                    self._lfs_verify(unquote(segments[1]))
                elif "resolve" in segments:
                    self._resolve(segments, user)
                elif segments[-1:] == ["batch"] and ".git" in split.path:
                    self._lfs_batch(segments, body, user)
                else:
                    raise HubError(404, f"no route for {self.command} {split.path}")
        except HubError as err:
            headers = {"X-Error-Message": str(err), **err.headers}
            if err.code:
                headers["X-Error-Code"] = err.code
            self._json(err.status, {"error": str(err)}, headers)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    # -- /api --------------------------------------------------------------------------------------------
    def _api(self, segments: list[str], query: dict, body: bytes, user: str | None):
        state = self.state
        if segments == ["whoami-v2"]:
            if user is None:
                raise HubError(401, "Invalid credentials in Authorization header")
            orgs = [{"name": name, "type": "org", "roleInOrg": "write"} for name in state.orgs.get(user, [])]
            return self._json(
                200,
                {
                    "type": "user",
                    "id": hashlib.sha1(user.encode()).hexdigest()[:24],
                    "name": user,
                    "fullname": user,
                    "orgs": orgs,
                    "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}},
                },
            )
        if segments == ["validate-yaml"]:
            content = json.loads(body or b"{}").get("content", "")
            errors = []
            if content.startswith("---") and _card_data(Blob(len(content), content.encode())) is None:
                errors.append({"message": "the YAML front matter does not parse into a mapping"})
            return self._json(400 if errors else 200, {"errors": errors, "warnings": []})
        if segments == ["repos", "create"]:
            status, payload = state.create_repo(json.loads(body or b"{}"), user, self.endpoint)
            return self._json(status, payload)
        if len(segments) < 3 or segments[0] not in _TYPES:
            raise HubError(404, f"no route for /api/{'/'.join(segments)}")
        repo_type = _TYPES[segments[0]]
        repo_id = f"{unquote(segments[1])}/{unquote(segments[2])}"
        action = segments[3] if len(segments) > 3 else None
        rest = [unquote(part) for part in segments[4:]]
        revision = rest[0] if rest else "main"
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        create_pr = query.get("create_pr", ["0"])[0] in ("1", "true")
        if action is None and self.command == "GET":
            return self._json(200, state.info(state.repo(repo_type, repo_id, user), "main", blobs))
        if action == "revision" and self.command == "GET":
            return self._json(200, state.info(state.repo(repo_type, repo_id, user), revision, blobs))
        if action == "tree" and self.command == "GET":
            recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
            repo = state.repo(repo_type, repo_id, user)
            return self._json(200, state.tree(repo, revision, "/".join(rest[1:]), recursive))
        if action == "paths-info" and self.command == "POST":
            form = parse_qs(body.decode())
            paths = form.get("paths", [])
            return self._json(200, state.paths_info(state.repo(repo_type, repo_id, user), revision, paths))
        if action == "refs" and self.command == "GET":
            include_prs = query.get("include_prs", ["0"])[0] in ("1", "true")
            return self._json(200, state.refs(state.repo(repo_type, repo_id, user), include_prs))
        if action == "commits" and self.command == "GET":
            return self._json(200, state.commits(state.repo(repo_type, repo_id, user), revision))
        if action == "branch":
            repo = state.writable_repo(repo_type, repo_id, user)
            if self.command == "DELETE":
                if repo.branches.pop(revision, None) is None:
                    raise HubError(404, f"branch {revision} not found", "RevisionNotFound")
                return self._json(200, {})
            if revision in repo.branches:
                raise HubError(409, f"Reference already exists: refs/heads/{revision}")
            start = json.loads(body or b"{}").get("startingPoint") or "main"
            repo.branches[revision] = state.commit_of(repo, start).oid
            return self._json(200, {})
        if action == "tag" and self.command == "POST":
            repo = state.writable_repo(repo_type, repo_id, user)
            tag = json.loads(body or b"{}")["tag"]
            if tag in repo.tags:
                raise HubError(409, f"Tag already exists: {tag}")
            repo.tags[tag] = state.commit_of(repo, revision).oid
            return self._json(200, {})
        if action == "preupload" and self.command == "POST":
            repo = state.writable_repo(repo_type, repo_id, user)
            return self._json(200, state.preupload(repo, revision, json.loads(body or b"{}"), create_pr))
        if action == "commit" and self.command == "POST":
            repo = state.writable_repo(repo_type, repo_id, user)
            if repo_id in state.failing_commits:
                raise HubError(state.failing_commits[repo_id], "Internal Error - the server failed (injected)")
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            return self._json(200, state.commit(repo, revision, lines, user, create_pr, self.endpoint))
        raise HubError(404, f"no route for {self.command} /api/{'/'.join(segments)}")

    # -- LFS ---------------------------------------------------------------------------------------------
    def _lfs_batch(self, segments: list[str], body: bytes, user: str | None):
        parts = [unquote(part) for part in segments]
        repo_type = _TYPES.get(parts[0], "model")
        names = parts[1:3] if repo_type != "model" or parts[0] == "models" else parts[0:2]
        repo_id = "/".join(names).removesuffix(".git")
        self.state.writable_repo(repo_type, repo_id, user)
        payload = json.loads(body or b"{}")
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            entry = {"oid": oid, "size": size, "authenticated": True}
            if oid not in self.state.lfs:
                entry["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-upload/{oid}?size={size}", "header": {}},
                    "verify": {"href": f"{self.endpoint}/lfs-verify/{oid}", "header": {}},
                }
            objects.append(entry)
        self._send(
            200,
            json.dumps({"transfer": "basic", "objects": objects}).encode(),
            content_type="application/vnd.git-lfs+json",
        )

    def _lfs_upload(self, oid: str, body: bytes):
        expected = parse_qs(urlsplit(self.path).query).get("size", [None])[0]
        if hashlib.sha256(body).hexdigest() != oid or (expected is not None and int(expected) != len(body)):
            raise HubError(400, f"LFS upload does not match its oid/size: {oid}")
        self.state.lfs[oid] = body
        self._send(200, b"", content_type="text/plain")

    def _lfs_verify(self, oid: str):
        if oid not in self.state.lfs:
            raise HubError(404, f"LFS object {oid} not found")
        self._json(200, {"success": True})

    # -- resolve -----------------------------------------------------------------------------------------
    def _resolve(self, segments: list[str], user: str | None):
        at = segments.index("resolve")
        head = [unquote(part) for part in segments[:at]]
        repo_type = _TYPES.get(head[0], "model") if len(head) == 3 else "model"
        repo_id = "/".join(head[-2:])
        if len(segments) < at + 3:
            raise HubError(404, "no file given")
        revision = unquote(segments[at + 1])
        path = "/".join(unquote(part) for part in segments[at + 2 :])
        repo = self.state.repo(repo_type, repo_id, user)
        commit = self.state.commit_of(repo, revision)
        blob = commit.files.get(path)
        if blob is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.oid})
        data = blob.data if blob.data is not None else self.state.lfs[blob.sha256]
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{blob.oid}"', "Accept-Ranges": "bytes"}
        if blob.sha256 is not None:
            headers.update({"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": blob.size})
        status = 200
        ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
        if ranged and data:
            start = int(ranged.group(1)) if ranged.group(1) else max(0, len(data) - int(ranged.group(2)))
            end = int(ranged.group(2)) if ranged.group(1) and ranged.group(2) else len(data) - 1
            end = min(end, len(data) - 1)
            if start > end:
                raise HubError(
                    416, "Range Not Satisfiable", headers={"Content-Range": f"bytes */{len(data)}"}
                )
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start : end + 1], 206
        self._send(status, data, headers, content_type="application/octet-stream")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, state: HubState):
        super().__init__(address, _Handler)
        self.state = state
        self.endpoint = f"http://{self.server_address[0]}:{self.server_address[1]}"


class HubServer:
    """A local Hub API server on ``127.0.0.1``, run in a background thread.

    Args:
        tokens: access token -> user name.
        orgs: user name -> organisations the user may write to.
        port: 0 picks a free port.

    Example::

        with HubServer({"hf_test": "alice"}) as hub:
            env = {"HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_XET": "1", "HF_TOKEN": "hf_test"}
    """

    def __init__(self, tokens: dict[str, str], orgs: dict[str, list[str]] | None = None, port: int = 0):
        self.state = HubState(tokens, orgs)
        self._server = _Server(("127.0.0.1", port), self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, name="hub-server", daemon=True)

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def files(self, repo_type: str, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The files of a repository at ``revision`` as ``path -> content`` (LFS files resolved)."""
        with self.state.lock:
            repo = self.state.repos[(repo_type, repo_id)]
            commit = self.state.commit_of(repo, revision)
            return {
                path: blob.data if blob.data is not None else self.state.lfs[blob.sha256]
                for path, blob in commit.files.items()
            }

    def lfs_paths(self, repo_type: str, repo_id: str, revision: str = "main") -> set[str]:
        """The paths stored through LFS in a repository at ``revision``."""
        with self.state.lock:
            commit = self.state.commit_of(self.state.repos[(repo_type, repo_id)], revision)
            return {path for path, blob in commit.files.items() if blob.sha256 is not None}


def repo_url(endpoint: str, repo_type: str, repo_id: str) -> str:
    """The web URL of a repository on this server."""
    return f"{endpoint}/{_PREFIX[repo_type]}{quote(repo_id)}"


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - manual use
    parser = argparse.ArgumentParser(description="a local Hub API server for tests")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", action="append", default=[], metavar="TOKEN=USER")
    args = parser.parse_args(argv)
    tokens = dict(item.split("=", 1) for item in args.token) or {"hf_test": "alice"}
    server = HubServer(tokens, port=args.port)
    print(f"Hub API at {server.endpoint} (tokens: {', '.join(tokens)})", flush=True)
    server._server.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
