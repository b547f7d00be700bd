//! Simulated proxies and synthetic meshes for measuring Shoal.
