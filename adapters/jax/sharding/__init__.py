"""Device meshes, logical axis rules and sharded placement of the JAX models (docs/performance.md, "Sharding")."""
