// What the compare pairing would ask of polars: two sides' runs, joined by
// configuration and metric, with each side's mean per group.
use polars::prelude::*;

fn main() -> PolarsResult<()> {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000usize);
    let side = |shift: f64| -> PolarsResult<DataFrame> {
        let configs: Vec<String> = (0..n * 3).map(|i| format!("bench[model=m{},batch={}]", (i / 3) % 50, i / 150)).collect();
        let values: Vec<f64> = (0..n * 3).map(|i| 5.0 + (i % 7) as f64 * 0.01 + shift).collect();
        df!("config" => configs, "value" => values)
    };
    let t = std::time::Instant::now();
    let (a, b) = (side(0.0)?, side(0.05)?);
    let made = t.elapsed();
    let t = std::time::Instant::now();
    let ga = a.lazy().group_by([col("config")]).agg([col("value").mean().alias("a")]);
    let gb = b.lazy().group_by([col("config")]).agg([col("value").mean().alias("b")]);
    let joined = ga
        .join(gb, [col("config")], [col("config")], JoinArgs::new(JoinType::Inner))
        .with_column((col("b") / col("a")).alias("ratio"))
        .collect()?;
    eprintln!("{} rows made in {:?}, joined in {:?}", joined.height(), made, t.elapsed());
    Ok(())
}
