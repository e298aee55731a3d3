// `router-admin access-key revoke`: the key is refused from the next request on (shared store), or once
// the gateway has re-read the keys file (file mode, proxy/keys-watch.ts).

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import type { KeyBackend } from '../../key-backend.ts';
import { AccessKeyCommand, accessKeyUsage } from './base.ts';

export class RevokeAccessKeyCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'revoke']];
  static override usage = accessKeyUsage({
    description: 'Revoke a key',
    details: `
      Marks the key revoked. In shared-store mode every instance refuses it at its next request; in file
      mode a running gateway re-reads the keys file within about 0.1 s (no reload needed). Keys given as
      ROUTER_ACCESS_KEY_<NAME> variables are not in either and change only with a restart.
    `,
    examples: [['Revoke a key', '$0 access-key revoke --config router.yaml --name client-a']],
  });

  name = Option.String('--name', { required: true, description: 'Key name' });

  async run(backend: KeyBackend): Promise<number> {
    const key = await backend.revoke(this.name);
    if (key === undefined) {
      this.context.stderr.write(`router-admin: no key named ${this.name} in the ${backend.where}\n`);
      return EXIT.failed;
    }
    this.out(`revoked key ${this.name}`);
    this.context.stderr.write(`${backend.pickup}\n`);
    return EXIT.ok;
  }
}
