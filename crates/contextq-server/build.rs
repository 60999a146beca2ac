//! Turns `CONTEXTQ_TEST_DATABASE_URL` into the `contextq_postgres` cfg, which enables the
//! PostgreSQL variants of the database tests (`contextq_server::database_tests!`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(contextq_postgres)");
    println!("cargo::rerun-if-env-changed=CONTEXTQ_TEST_DATABASE_URL");
    if std::env::var("CONTEXTQ_TEST_DATABASE_URL").is_ok_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=contextq_postgres");
    }
}
