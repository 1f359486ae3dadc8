"""Tenants: accounts and API keys, their administration, master data.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.tenants.accounts import (
    Principal,
    Tenant,
    VerifiedKey,
    authenticate,
    create_api_key,
    create_tenant,
    get_tenant_by_name,
    hash_key,
    key_digest,
    list_tenants,
    principal_for_key_id,
    verify_key,
)
from pipeline.tenants.admin import (
    CONSOLE_KEY_SCOPES,
    LOCAL_TENANT,
    SCOPES,
    IssuedKey,
    add_tenant,
    console_key,
    issue_key,
    list_keys,
    resolve_tenant,
    revoke_key,
    set_quotas,
    tenant_usage,
)
from pipeline.tenants.master_data import (
    MasterDataCache,
    add_supplier,
    list_suppliers,
    load_master_data,
    permit_currencies,
    set_currencies,
    upsert_supplier,
)
from pipeline.tenants.reconciliation import ReconcileReport, SpendReconciler
from pipeline.tenants.sessions import close_session, open_session, session_principal
from pipeline.tenants.spend_metrics import SpendMetrics
from pipeline.tenants.supplier_identities import seal_register

__all__ = [
    "CONSOLE_KEY_SCOPES",
    "LOCAL_TENANT",
    "SCOPES",
    "IssuedKey",
    "MasterDataCache",
    "Principal",
    "ReconcileReport",
    "SpendMetrics",
    "SpendReconciler",
    "Tenant",
    "VerifiedKey",
    "add_supplier",
    "add_tenant",
    "authenticate",
    "close_session",
    "console_key",
    "create_api_key",
    "create_tenant",
    "get_tenant_by_name",
    "hash_key",
    "issue_key",
    "key_digest",
    "list_keys",
    "list_suppliers",
    "list_tenants",
    "load_master_data",
    "open_session",
    "permit_currencies",
    "principal_for_key_id",
    "resolve_tenant",
    "revoke_key",
    "seal_register",
    "session_principal",
    "set_currencies",
    "set_quotas",
    "tenant_usage",
    "upsert_supplier",
    "verify_key",
]
