use clap::Parser;

// mimalloc returns freed memory to the OS where glibc's malloc keeps the buffers of a
// sync burst: RSS then reflects what the process holds.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = shoal_ingest::cli::Args::parse();
    shoal_infra::cli::exit("ingest", run(args))
}

#[tokio::main]
async fn run(args: shoal_ingest::cli::Args) -> anyhow::Result<std::process::ExitCode> {
    shoal_ingest::cli::run(args).await?;
    Ok(std::process::ExitCode::SUCCESS)
}
