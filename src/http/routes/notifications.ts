import type { FastifyInstance } from 'fastify';
import { listInboxMessages, markInboxMessageRead } from '../../admin/inbox.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { route } from '../route.js';

/** The caller's own inbox messages (src/admin/inbox.ts), for any role. */
export function notificationRoutes(app: FastifyInstance, svc: Service): void {
  route(app, 'listNotifications', async ({ query }, req) => listInboxMessages(svc.db.pool, principalOf(req).id, query));

  route(app, 'markNotificationRead', async ({ params: { id } }, req) => markInboxMessageRead(svc.db.pool, principalOf(req).id, id));
}
