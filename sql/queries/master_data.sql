-- name: supplier_upsert
-- Keyed by (tenant, VAT id): a second add for the same VAT id replaces the name, the
-- tax number and the IBANs on file. ``created`` is false for such an update. A tax
-- number another supplier of the tenant holds violates its unique key (refused).
-- $5: the IBANs as stored (sealed with a KEK), $7: their keyed hashes (migration 044);
-- with a KEK $3 is the name sealed, $4 and $6 the ids' keyed hashes, $8 and $9 the
-- ids sealed (migration 048; pipeline/tenants/supplier_identities.py); $10 the
-- national accounts as stored (sealed as the IBANs), $11 their keyed hashes (047).
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number, iban_keys,
                       vat_id_sealed, tax_number_sealed, accounts, account_keys)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (tenant_id, vat_id) DO UPDATE
  SET name = EXCLUDED.name, ibans = EXCLUDED.ibans, tax_number = EXCLUDED.tax_number,
      iban_keys = EXCLUDED.iban_keys, vat_id_sealed = EXCLUDED.vat_id_sealed,
      tax_number_sealed = EXCLUDED.tax_number_sealed, accounts = EXCLUDED.accounts,
      account_keys = EXCLUDED.account_keys
RETURNING id, (xmax = 0) AS created;

-- name: supplier_upsert_by_tax_number
-- A supplier without VAT id (migration 041), keyed by (tenant, tax number): a second
-- add for the same tax number replaces the name, the IBANs and the national accounts
-- on file (a VAT id the stored supplier has stays). ``created`` is false for such an
-- update. Sealed as supplier_upsert ($7: the tax number sealed; $8, $9: the national
-- accounts and their keyed hashes).
INSERT INTO suppliers (id, tenant_id, name, vat_id, ibans, tax_number, iban_keys,
                       tax_number_sealed, accounts, account_keys)
VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, $8, $9)
ON CONFLICT (tenant_id, tax_number) DO UPDATE
  SET name = EXCLUDED.name, ibans = EXCLUDED.ibans, iban_keys = EXCLUDED.iban_keys,
      tax_number_sealed = EXCLUDED.tax_number_sealed, accounts = EXCLUDED.accounts,
      account_keys = EXCLUDED.account_keys
RETURNING id, (xmax = 0) AS created;

-- name: supplier_list_for_tenant
-- The tenant's suppliers as stored; the caller opens them and orders them by name,
-- VAT id, then tax number (the name may be sealed: migration 048).
SELECT name, vat_id, ibans, tax_number, vat_id_sealed, tax_number_sealed, accounts
FROM suppliers WHERE tenant_id = $1
ORDER BY id;

-- name: supplier_list_unsealed
-- Suppliers with a name, an IBAN or a national account stored unsealed (before
-- migrations 044 and 048, or written without a KEK), for ``seal_register``; $1 at most.
SELECT id, tenant_id, name, vat_id, tax_number, vat_id_sealed, tax_number_sealed, ibans,
       accounts
FROM suppliers
WHERE name NOT LIKE 'fenceline-sealed:v1:%'
   OR EXISTS (SELECT 1 FROM unnest(ibans) AS i WHERE i NOT LIKE 'fenceline-sealed:v1:%')
   OR EXISTS (SELECT 1 FROM unnest(accounts) AS a WHERE a NOT LIKE 'fenceline-sealed:v1:%')
ORDER BY id
LIMIT $1;

-- name: supplier_register_update_if_same
-- A supplier sealed: its name ($4), ids ($5-$8: keyed hashes and sealed values),
-- IBANs ($9) with their keyed hashes ($10), national accounts ($12) with theirs ($13),
-- if its IBANs, name and accounts are still the ones read ($2, $3, $11): a supplier
-- added again meanwhile keeps what its writer stored.
UPDATE suppliers SET name = $4, vat_id = $5, vat_id_sealed = $6, tax_number = $7,
                     tax_number_sealed = $8, ibans = $9, iban_keys = $10,
                     accounts = $12, account_keys = $13
WHERE id = $1 AND ibans = $2 AND name = $3 AND accounts = $11
RETURNING id;

-- name: tenant_currencies_update_if_exists
-- The tenant's permitted currencies (ISO 4217, checked by the caller).
UPDATE tenants SET allowed_currencies = $2 WHERE id = $1 RETURNING allowed_currencies;
