/** Credentials in URLs, hidden wherever a URL is shown: config errors, the start-up line, the API. */

export const REDACTED = '[redacted]';

/** A query (or fragment) parameter: `[?&;#]name=value`; a libpq keyword string uses spaces. */
const PARAM = /([?&;#\s])([^=&#;?/\s]+)=([^&#;\s]*)/g;
/** Names that carry credentials: a whole word of the name (`api_key`, `X-Amz-Signature`) or a camelCase tail (`apiKey`). */
const CREDENTIAL_WORD = /(?:^|[_.-])(?:pass(?:word|wd)?|secret|token|key|apikey|sig|signature|auth|authorization|credentials?)(?:$|[_.-])/i;
const CREDENTIAL_TAIL = /[a-z0-9](?:Key|Token|Secret|Signature|Password|Auth)$/;

/**
 * Hides the password of `scheme://user:password@host`, the user of an http(s) URL with no
 * password (`https://TOKEN@host`, a common way to pass a key), and the values of credential-named
 * query and fragment parameters (`token`, `api_key`, `sig`, `X-Amz-Signature`, `apiKey`…).
 */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@]*?:)[^/?#]*@/i, `$1${REDACTED}@`)
    .replace(/^(https?:\/\/)[^/?#@:]+@/i, `$1${REDACTED}@`)
    .replaceAll(PARAM, (all, lead: string, name: string) =>
      CREDENTIAL_WORD.test(name) || CREDENTIAL_TAIL.test(name) ? `${lead}${name}=${REDACTED}` : all,
    );
}
