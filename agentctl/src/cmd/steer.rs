//! `agentctl steer` and `agentctl follow-up`: queue a message for a working session.

use super::{Context, join_text, print, resolve};
use crate::error::Result;
use agentd_proto::TextParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Message {
    session: String,
    text: Vec<String>,
    #[command(flatten)]
    pub(crate) images: super::image::ImageArgs,
}

impl Message {
    async fn params(&mut self, ctx: &Context) -> Result<TextParams> {
        Ok(TextParams {
            session_id: resolve(&ctx.conn, &self.session).await?,
            text: join_text(&self.text)?,
            images: self.images.take(),
        })
    }

    /// Injected after the current tool round.
    pub(crate) async fn steer(mut self, ctx: &Context) -> Result<u8> {
        let r = ctx
            .conn
            .call::<m::SessionSteer>(self.params(ctx).await?)
            .await?;
        print(ctx.json, &r, |r| println!("{}", r.input_id));
        Ok(0)
    }

    /// Run after the current input completes.
    pub(crate) async fn follow_up(mut self, ctx: &Context) -> Result<u8> {
        let r = ctx
            .conn
            .call::<m::SessionFollowUp>(self.params(ctx).await?)
            .await?;
        print(ctx.json, &r, |r| println!("{}", r.input_id));
        Ok(0)
    }
}
