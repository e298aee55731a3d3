// The stored forms of access keys, apart from the authenticate hook so that `router-admin` hashes a key
// without loading the wire families whose carriers the hook reads.

import { createHmac } from 'node:crypto';

/** base64url(HMAC-SHA256(secret, key)): the stored form of an access key (docs/operations.md "Keys in Redis"). */
export function hashAccessKey(hashSecret: string, key: string): string {
  return createHmac('sha256', hashSecret).update(key).digest('base64url');
}

/**
 * Names a hash secret without revealing it: a short HMAC of a fixed label under the secret. Stored with
 * each record so `router-admin access-key list` can tell which secret hashed it (docs/operations.md,
 * "Rotating the hash secret").
 */
export function hashSecretId(hashSecret: string): string {
  return createHmac('sha256', hashSecret)
    .update('router access-key hash secret id')
    .digest('base64url')
    .slice(0, 12);
}
