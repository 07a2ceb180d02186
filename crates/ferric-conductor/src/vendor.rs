//! Vendor passthru (`/v1/nodes/{node}/vendor_passthru?method=…`, and the driver-level
//! `/v1/drivers/{driver}/vendor_passthru`): a method of the node's vendor interface, run the
//! way Ironic's conductor runs it.
//!
//! The method is looked up by name and HTTP method and its arguments are checked before
//! anything runs, so every refusal is the caller's 400. A method that requires the node's
//! lease (the default) runs under it — taken here, so a node another task holds answers 409 —
//! and what it wrote into the node is saved. A synchronous method answers with its return
//! value; an asynchronous one takes a worker (none free: 503) and runs after the answer, its
//! failure recorded in the node's history.

use std::sync::Arc;

use ferric_drivers::{Drivers, VendorInterface, VendorMethod};
use ferric_model::resources::{Ident, JsonObject};
use serde_json::Value;
use uuid::Uuid;

pub use ferric_model::action::VendorReply;

use crate::task::Task;
use crate::{Conductor, ConductorError};

/// `method`'s answer `value`, with how the API returns it.
fn reply_of(method: &VendorMethod, value: Value) -> VendorReply {
    VendorReply {
        value,
        is_async: method.is_async,
        attach: method.attach,
    }
}

impl Conductor {
    /// Calls vendor method `method` of `node` with `args` (the request's JSON object).
    pub async fn vendor_passthru(
        &self,
        node: Uuid,
        method: &str,
        http_method: &str,
        args: JsonObject,
    ) -> Result<VendorReply, ConductorError> {
        let inner = &self.inner;
        let http_method = http_method.to_ascii_uppercase();
        let record = inner.store.node_get(&Ident::Uuid(node)).await?;
        let vendor = inner.drivers.load(&record)?.vendor;
        let found = *VendorMethod::find(vendor.methods(), &record.driver, method, &http_method)?;

        if !found.require_exclusive_lock {
            // Ironic's shared lock: the node is read, not held, and nothing it writes is saved.
            vendor.check_call(&record, &found, &args).await?;
            let mut record = record;
            if !found.is_async {
                let value = vendor
                    .call(&mut record, &found, &http_method, &args)
                    .await?;
                return Ok(reply_of(&found, value));
            }
            let permit = inner.take_worker()?;
            inner.tracker.spawn(async move {
                let _permit = permit;
                if let Err(error) = vendor.call(&mut record, &found, &http_method, &args).await {
                    tracing::warn!(node = %node, method = found.name, error = %error, "vendor passthru method failed");
                }
            });
            return Ok(reply_of(&found, Value::Null));
        }

        let permit = if found.is_async {
            Some(inner.take_worker()?)
        } else {
            None
        };
        let mut task = Task::acquire(inner, node).await?;
        // Again under the lease: the node's vendor interface may have changed meanwhile.
        let checked = async {
            let vendor = task.interfaces()?.vendor;
            let found =
                *VendorMethod::find(vendor.methods(), &task.node.driver, method, &http_method)?;
            vendor.check_call(&task.node, &found, &args).await?;
            Ok::<_, ConductorError>((vendor, found))
        }
        .await;
        let (vendor, found) = match checked {
            Ok(checked) => checked,
            Err(error) => {
                task.release().await;
                return Err(error);
            }
        };
        if found.is_async {
            inner.tracker.spawn(async move {
                let _permit = permit;
                if let Err(error) = run(&mut task, &vendor, &found, &http_method, &args).await {
                    task.history(
                        "ERROR",
                        "vendor_passthru",
                        format!("Vendor passthru method {} failed: {error}", found.name),
                    )
                    .await;
                }
                task.release().await;
            });
            return Ok(reply_of(&found, Value::Null));
        }
        let result = run(&mut task, &vendor, &found, &http_method, &args).await;
        task.release().await;
        Ok(reply_of(&found, result?))
    }
}

/// Runs a method under the task's lease and saves what it changed in the node.
async fn run(
    task: &mut Task,
    vendor: &Arc<dyn VendorInterface>,
    method: &VendorMethod,
    http_method: &str,
    args: &JsonObject,
) -> Result<Value, ConductorError> {
    let before = task.node.clone();
    let result = vendor.call(&mut task.node, method, http_method, args).await;
    if let Err(error) = &result {
        tracing::warn!(node = %task.uuid(), method = method.name, error = %error, "vendor passthru method failed");
    }
    let value = result?;
    if task.node != before {
        task.save().await?;
    }
    Ok(value)
}

/// Calls driver-level vendor method `method` of hardware type `driver` (the type's default
/// vendor interface, as Ironic picks it). No node is involved, so it runs in the calling
/// process; an asynchronous method runs on the runtime after the answer.
pub(crate) async fn driver_vendor_passthru(
    drivers: &Drivers,
    driver: &str,
    method: &str,
    http_method: &str,
    args: JsonObject,
) -> Result<VendorReply, ConductorError> {
    let http_method = http_method.to_ascii_uppercase();
    let vendor = drivers.driver_vendor(driver)?;
    let found = *VendorMethod::find(vendor.driver_methods(), driver, method, &http_method)?;
    vendor.check_driver_call(driver, &found, &args).await?;
    if !found.is_async {
        let value = vendor
            .driver_call(driver, &found, &http_method, &args)
            .await?;
        return Ok(reply_of(&found, value));
    }
    let driver = driver.to_owned();
    tokio::spawn(async move {
        if let Err(error) = vendor
            .driver_call(&driver, &found, &http_method, &args)
            .await
        {
            tracing::warn!(driver, method = found.name, error = %error, "driver vendor passthru method failed");
        }
    });
    Ok(reply_of(&found, Value::Null))
}
