"""Artifacts on the runtime side: the file layout and decode-config schema, the manifest, the store, the fetch."""
