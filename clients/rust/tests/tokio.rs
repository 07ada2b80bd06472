//! The async connection (feature `tokio`), against a real server.
#![cfg(feature = "tokio")]

mod common;

use common::Server;
use idcar_client::{tokio::Connection, Error};

#[tokio::test]
async fn the_async_connection_describes_pipelines_and_reports_refusals() {
    let s = Server::start(&["--layout", "muid128"]);
    let mut c = Connection::connect(&s.socket).await.unwrap();
    let d = c.describe().await.unwrap();
    assert_eq!((d.layout.as_str(), d.width), ("muid128", 16));
    c.send(10).await.unwrap();
    c.send(20).await.unwrap();
    assert_eq!(c.recv().await.unwrap().len(), 10);
    assert_eq!(c.recv().await.unwrap().len(), 20);
    assert!(matches!(c.ids(0).await, Err(Error::BadRequest(_))));
    let tx = idcar_client::RequestOptions {
        meta: None,
        transaction: true,
    };
    c.send_with(3, &tx).await.unwrap();
    let ids = c.recv().await.unwrap();
    let offsets: Vec<i64> = ids
        .iter()
        .map(|raw| {
            d.id_from_bytes(raw)
                .unwrap()
                .decode()
                .unwrap()
                .int("offset")
                .unwrap()
        })
        .collect();
    assert_eq!(offsets, [1, 2, 3]);
    let missing = s.dir.path().join("missing.sock");
    assert!(matches!(
        Connection::connect(&missing).await,
        Err(Error::Connect { .. })
    ));
}
