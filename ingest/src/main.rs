use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    shoal_ingest::cli::run(shoal_ingest::cli::Args::parse()).await
}
