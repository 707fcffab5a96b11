"""The bottom layer: errors, canonical JSON and atomic writes, fingerprints, leases, the store,
registries and the strict YAML loader. It imports nothing else of rbench."""
