//! The integration tests: one binary, one module per capability, so the
//! agent, tokio, SQLite and rustls are linked once rather than once per file.
//! Shared helpers: `common` (sites, brokers, processes, logs), and the
//! support modules of the OpenAPI, steering and store tests.
//!
//! Run one module with `cargo test --test it <module>::`.

mod common;
mod openapi_support;
mod steering_support;
mod store_support;

mod api_limits;
mod architecture;
mod bounds;
mod check_config;
mod clock;
mod config_ops;
mod contract;
mod demo;
mod demo_grid;
mod device_data;
mod device_failure;
mod disk_full;
mod fronius_gen24;
mod grid_loop;
mod grid_transitions;
mod metrics;
mod modbus_discovery;
mod modbus_faults;
mod modbus_plan;
mod modbus_refused_reads;
mod modbus_sunspec;
mod modbus_sunspec_families;
mod mqtt_backlog;
mod mqtt_demo;
mod mqtt_fleet;
mod mqtt_grid_limit;
mod mqtt_incoming;
mod mqtt_offline;
mod mqtt_ops_acl;
mod mqtt_outbox;
mod mqtt_refusal;
mod mqtt_rpc;
mod mqtt_rpc_record;
mod mqtt_steering;
mod mqtt_telemetry;
mod mqtt_tls;
mod openapi;
mod openapi_generated;
mod ops;
mod page_browser;
mod page_demo;
mod profile_hybrids;
mod profile_library;
mod profile_recipes;
mod profile_variants;
mod profiles;
mod rtu;
mod scan;
mod service;
mod steering_api;
mod steering_e2e;
mod steering_found;
mod steering_profiles;
mod steering_raise;
mod steering_restart;
mod steering_revert;
mod steering_stop;
mod steering_writes;
mod store_damaged;
mod store_durability;
mod store_growth;
mod store_hook;
mod store_http;
mod store_query;
mod store_readers;
mod store_restamp;
mod store_retention;
mod store_timeseries_http;
mod store_unopenable;
mod store_upgrade;
mod store_writer;
