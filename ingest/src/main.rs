use clap::Parser;

// mimalloc returns freed memory to the OS where glibc's malloc keeps the buffers of a
// sync burst: RSS then reflects what the process holds.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    shoal_ingest::cli::run(shoal_ingest::cli::Args::parse()).await
}
