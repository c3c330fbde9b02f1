/** A new endpoint's signing secret, for when the caller of the endpoints API gives none (it is shown once). */
import { randomBytes } from 'node:crypto';
import type { Scheme } from '../config/index.js';

/** 32 random bytes: base64url for scheme `acw`, `whsec_` + base64 for `standard` (as Standard Webhooks receivers expect). */
export function newSigningSecret(scheme: Scheme): string {
  const key = randomBytes(32);
  return scheme === 'standard' ? `whsec_${key.toString('base64')}` : key.toString('base64url');
}
