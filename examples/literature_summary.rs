//! Prints the literature validation rows and the per-table summary (issue 13's figures) with the
//! time each table takes: `cargo run --release --example literature_summary`. The last table
//! (the kernel test robot's SCTP runs) is beyond the folder and left out of its totals.
use pcpmodel::validate::literature as lit;

fn main() -> pcpmodel::Result<()> {
    type Table = fn() -> pcpmodel::Result<pcpmodel::validate::TableValidation>;
    use pcpmodel::validate::literature_dhama as dhama;
    use pcpmodel::validate::literature_huang as huang;
    use pcpmodel::validate::literature_lkp as lkp;
    let tables: [(&str, Table); 8] = [
        ("halbuer", lit::halbuer),
        ("kemi wang", lit::kemi_wang),
        ("daniel jordan", lit::daniel_jordan),
        ("huang cover", huang::huang_cover),
        ("huang prose", huang::huang_prose),
        ("dhama sweep", dhama::dhama_sweep),
        ("dhama multi", dhama::dhama_multi),
        // Beyond the folder: independent runs, not counted in its figures.
        ("lkp sctp, beyond the folder", lkp::lkp_sctp),
    ];
    let (mut total, mut total_dir, mut total_within) = (0, 0, 0);
    for (name, f) in tables {
        let t0 = std::time::Instant::now();
        let t = f()?;
        let dt = t0.elapsed();
        println!("== {} ({name}: {:.0} ms)", t.title, dt.as_secs_f64() * 1e3);
        for r in &t.rows {
            println!(
                "{:<60} {:<16} measured {:>12.4} predicted {:>12.4} {:+.1} %",
                r.case,
                r.quantity,
                r.measured,
                r.predicted,
                100.0 * r.rel_error
            );
        }
        let (n, dir, within) = lit::ratio_summary(&t);
        println!("ratio rows {n}: direction right {dir}, within 25 % of the change {within}");
        if !name.contains("beyond the folder") {
            total += n;
            total_dir += dir;
            total_within += within;
        }
    }
    println!(
        "the folder's tables: ratio rows {total}, direction right {total_dir}, within 25 % of the change {total_within}"
    );
    Ok(())
}
