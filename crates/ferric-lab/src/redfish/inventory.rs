//! The lab BMC's inventory under a System: Processors, Memory, SimpleStorage and
//! EthernetInterfaces, as QEMU gives the machine (read-only).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::RedfishBmc;
use super::error::RedfishError;
use super::wire::{collection, odata, with};
use crate::machine::MachineControl;

pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/Systems/{id}/Processors", get(processors::<M>))
        .route(
            "/redfish/v1/Systems/{id}/Processors/{cpu}",
            get(processor_get::<M>),
        )
        .route("/redfish/v1/Systems/{id}/Memory", get(memory::<M>))
        .route(
            "/redfish/v1/Systems/{id}/Memory/{dimm}",
            get(memory_get::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/SimpleStorage",
            get(simple_storage::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/SimpleStorage/{controller}",
            get(simple_storage_get::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/EthernetInterfaces",
            get(nics::<M>),
        )
        .route(
            "/redfish/v1/Systems/{id}/EthernetInterfaces/{nic}",
            get(nic_get::<M>),
        )
}

const CPU_ID: &str = "CPU.1";
const DIMM_ID: &str = "DIMM.1";
const STORAGE_ID: &str = "SATA.1";

/// One processor package with all the machine's vCPUs (QEMU's default topology).
async fn processors<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Processors");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#ProcessorCollection.ProcessorCollection",
        "Processors Collection",
        &[format!("{uri}/{CPU_ID}")],
    ))
}

async fn processor_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, cpu)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Processors/{cpu}");
    bmc.check_system(&id, &uri)?;
    if cpu != CPU_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let cpus = bmc.machine.info().cpus;
    Ok(with(
        odata(&uri, "#Processor.v1_7_0.Processor"),
        json!({
            "Id": CPU_ID,
            "Name": "Processor 1",
            "Socket": "CPU 1",
            "ProcessorType": "CPU",
            "ProcessorArchitecture": "x86",
            "InstructionSet": "x86-64",
            "Manufacturer": "QEMU",
            "Model": "QEMU TCG x86-64",
            "MaxSpeedMHz": 2000,
            "TotalCores": cpus,
            "TotalThreads": cpus,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

/// One DIMM with all the machine's memory.
async fn memory<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Memory");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#MemoryCollection.MemoryCollection",
        "Memory Module Collection",
        &[format!("{uri}/{DIMM_ID}")],
    ))
}

async fn memory_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, dimm)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Memory/{dimm}");
    bmc.check_system(&id, &uri)?;
    if dimm != DIMM_ID {
        return Err(RedfishError::NotFound { uri });
    }
    Ok(with(
        odata(&uri, "#Memory.v1_7_0.Memory"),
        json!({
            "Id": DIMM_ID,
            "Name": "DIMM 1",
            "MemoryType": "DRAM",
            "MemoryDeviceType": "DDR4",
            "CapacityMiB": bmc.machine.info().memory_mib,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

/// The machine's disks (virtio, `qemu-img` images of the lab's size).
async fn simple_storage<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/SimpleStorage");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#SimpleStorageCollection.SimpleStorageCollection",
        "Simple Storage Collection",
        &[format!("{uri}/{STORAGE_ID}")],
    ))
}

async fn simple_storage_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, controller)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/SimpleStorage/{controller}");
    bmc.check_system(&id, &uri)?;
    if controller != STORAGE_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let disks = if bmc.disk_bytes == 0 {
        0
    } else {
        crate::layout::DISKS
    };
    let devices: Vec<Value> = (1..=disks)
        .map(|index| {
            json!({
                "Name": format!("Disk {index}"),
                "Manufacturer": "QEMU",
                "Model": "QEMU HARDDISK",
                "CapacityBytes": bmc.disk_bytes,
                "Status": {"State": "Enabled", "Health": "OK"},
            })
        })
        .collect();
    Ok(with(
        odata(&uri, "#SimpleStorage.v1_2_0.SimpleStorage"),
        json!({
            "Id": STORAGE_ID,
            "Name": "Simple Storage Controller",
            "Devices": devices,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

const NIC_ID: &str = "NIC.1";

async fn nics<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/EthernetInterfaces");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#EthernetInterfaceCollection.EthernetInterfaceCollection",
        "Ethernet Interface Collection",
        &[format!("{uri}/{NIC_ID}")],
    ))
}

async fn nic_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, nic)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/EthernetInterfaces/{nic}");
    bmc.check_system(&id, &uri)?;
    if nic != NIC_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let mac = &bmc.machine.info().mac;
    Ok(with(
        odata(&uri, "#EthernetInterface.v1_4_0.EthernetInterface"),
        json!({
            "Id": NIC_ID,
            "Name": "virtio-net NIC",
            "MACAddress": mac,
            "PermanentMACAddress": mac,
            "LinkStatus": "LinkUp",
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}
